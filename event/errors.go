package event

import (
	"errors"
	"fmt"
	"strconv"
)

// ErrMalformedRow is wrapped by every *RowError: the row does not fit the
// FIELD event it was encoded against (wrong value count, lengths that
// overrun the value bytes, a value that cannot be of its column's type, a
// missing before/after image). It signals a protocol mismatch, never a
// problem of the data itself, so retrying the same row will not help.
var ErrMalformedRow = errors.New("malformed row")

// ErrBadFieldEvent is wrapped by every *FieldEventError.
var ErrBadFieldEvent = errors.New("unusable FIELD event")

// RowError describes a row that could not be encoded.
type RowError struct {
	Keyspace string
	Shard    string
	Table    string
	Op       Op
	// Image is "before" or "after"; empty when the error concerns the change
	// as a whole (an unknown op, a missing image).
	Image string
	// Column is the column whose value failed; empty when the error concerns
	// the row as a whole.
	Column string
	// Value is a prefix (at most 64 bytes) of the offending value, if any.
	Value  []byte
	Reason string
}

func (e *RowError) Error() string {
	msg := "event: " + e.Keyspace + "/" + e.Shard + " " + e.Table
	if e.Op != "" {
		msg += " " + string(e.Op)
	}
	if e.Image != "" {
		msg += " " + e.Image
	}
	if e.Column != "" {
		msg += " column " + strconv.Quote(e.Column)
	}
	msg += ": " + e.Reason
	if e.Value != nil {
		msg += fmt.Sprintf(" (value %q)", e.Value)
	}
	return msg
}

// Unwrap makes errors.Is(err, ErrMalformedRow) true.
func (e *RowError) Unwrap() error { return ErrMalformedRow }

// FieldEventError describes a FIELD event NewTable cannot compile.
type FieldEventError struct {
	Keyspace string
	Table    string
	Reason   string
}

func (e *FieldEventError) Error() string {
	return "event: FIELD event for " + e.Keyspace + " " + strconv.Quote(e.Table) + ": " + e.Reason
}

// Unwrap makes errors.Is(err, ErrBadFieldEvent) true.
func (e *FieldEventError) Unwrap() error { return ErrBadFieldEvent }

// valueError is what a column encoder returns; the row encoder turns it
// into a *RowError carrying the table, image and column.
type valueError string

func (e valueError) Error() string { return string(e) }

func errorValue(v []byte) []byte {
	const max = 64
	if len(v) > max {
		v = v[:max]
	}
	return append([]byte{}, v...)
}
