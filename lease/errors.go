package lease

import (
	"errors"
	"fmt"
)

var (
	// ErrLost is in the chain of every error reporting that a held lease
	// was lost while its work ran.
	ErrLost = errors.New("lease lost")
	// ErrExpired is in the chain of a LostError when no renewal succeeded
	// before the local deadline: the lease is presumed lost, whatever the
	// store would say.
	ErrExpired = errors.New("lease not renewed before its local deadline")
)

// LostError reports a lease lost while held: Err is the store's answer
// (wrapping store.ErrLeaseLost) or ErrExpired, with the last renewal
// error if there was one. errors.Is matches ErrLost and everything Err
// matches.
type LostError struct {
	Name   string
	Holder string
	Token  uint64
	Err    error
}

func (e *LostError) Error() string {
	return fmt.Sprintf("lease %q of %q (token %d) lost: %v", e.Name, e.Holder, e.Token, e.Err)
}

// Unwrap returns ErrLost and the cause.
func (e *LostError) Unwrap() []error { return []error{ErrLost, e.Err} }

// expired is the cause of a loss presumed at the local deadline; last is
// the error of the last failed renewal, nil when none failed (they hung,
// or the process was paused).
func expired(last error) error {
	if last == nil {
		return ErrExpired
	}
	return fmt.Errorf("%w (last renewal error: %w)", ErrExpired, last)
}
