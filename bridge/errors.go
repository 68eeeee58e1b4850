package bridge

import "errors"

// ErrSpoolFull is reported when a bridge would exceed the spool bound; the
// subscriber is left as it was and resumes with its stream's on_gap policy
// if the old shards are gone when it returns.
var ErrSpoolFull = errors.New("bridge spool limit exceeded")

// ErrOption is what New reports for an option it cannot take.
var ErrOption = errors.New("bridge: invalid option")
