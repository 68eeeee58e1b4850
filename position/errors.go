package position

import (
	"errors"
	"strconv"
)

// Kinds of failure; every error the package returns is an *Error whose
// Kind is one of them.
var (
	// ErrCorrupt: bytes that are not a serialized position.
	ErrCorrupt = errors.New("corrupt position")
	// ErrNoGTID: an entry without a GTID set to compare ("", "current",
	// or a set with no transactions).
	ErrNoGTID = errors.New("no GTID set")
	// ErrBadGTID: text that is not a GTID set vstreamer could have sent
	// (no flavor, unknown flavor, bad syntax).
	ErrBadGTID = errors.New("malformed GTID set")
)

// Error is a position or GTID set that could not be read.
type Error struct {
	Kind  error  // ErrCorrupt, ErrNoGTID or ErrBadGTID
	Input string // the GTID text, for ErrNoGTID and ErrBadGTID
	Err   error  // the protobuf or replication package's error, if any
}

func (e *Error) Error() string {
	msg := e.Kind.Error()
	if e.Kind != ErrCorrupt {
		msg = "GTID " + quote(e.Input) + ": " + msg
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap lets errors.Is match both the kind and the cause.
func (e *Error) Unwrap() []error {
	if e.Err != nil {
		return []error{e.Kind, e.Err}
	}
	return []error{e.Kind}
}

// quote bounds what a malformed GTID can put in a log line or an API
// error: a GTID set of a long-lived MySQL server lists many UUIDs.
func quote(s string) string {
	const max = 120
	if len(s) > max {
		return strconv.Quote(s[:max]) + "…"
	}
	return strconv.Quote(s)
}
