package hub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
)

// A named subscriber's cursor moves past every row its readers were sent
// and every row their token's table scope withheld alike: the position is
// the stream's, not the scope's. Read later with a wider scope, the rows
// withheld before are behind the cursor and never come. So a subscriber is
// bound to the scope it was created with (stored in its state), and a
// reader or an ack with another scope is refused (DESIGN §2).

// Scope is the effective table scope of a named subscriber: which of its
// stream's tables its token may read. Tables are the stream's named
// tables the token allows, sorted; Globs are the token's table globs as
// given, sorted, for a stream with a /regex/ rule, whose tables cannot be
// listed. An empty scope (no tables, no globs) reads control events only.
type Scope struct {
	Tables []string `json:"tables"`
	Globs  []string `json:"globs,omitempty"`
}

// NewScope returns the scope of tables and globs, sorted and without
// repeats, so that equal scopes compare equal.
func NewScope(tables, globs []string) *Scope {
	norm := func(s []string) []string {
		s = slices.Clone(s)
		slices.Sort(s)
		return slices.Compact(s)
	}
	sc := &Scope{Tables: norm(tables), Globs: norm(globs)}
	if sc.Tables == nil {
		sc.Tables = []string{}
	}
	if len(sc.Globs) == 0 {
		sc.Globs = nil
	}
	return sc
}

// Equal reports whether s and o are the same scope.
func (s *Scope) Equal(o *Scope) bool {
	return slices.Equal(s.Tables, o.Tables) && slices.Equal(s.Globs, o.Globs)
}

// Within reports whether s reads nothing that o does not: every table of s
// is in o, and s has no globs o lacks.
func (s *Scope) Within(o *Scope) bool {
	for _, t := range s.Tables {
		if !slices.Contains(o.Tables, t) {
			return false
		}
	}
	for _, g := range s.Globs {
		if !slices.Contains(o.Globs, g) {
			return false
		}
	}
	return true
}

// String renders s for messages: ["corder","customer"], with the globs
// after a "+" when there are any.
func (s *Scope) String() string {
	b, _ := json.Marshal(s.Tables)
	if len(s.Globs) == 0 {
		return string(b)
	}
	g, _ := json.Marshal(s.Globs)
	return string(b) + " + globs " + string(g)
}

// ErrScopeMismatch is the class of ScopeMismatchError.
var ErrScopeMismatch = errors.New("subscriber scope mismatch")

// ScopeMismatchError: a request for a subscriber bound to another scope.
type ScopeMismatchError struct {
	Subscriber string
	Stored     *Scope // the scope the subscriber was created with
	Given      *Scope // the request's
}

func (e *ScopeMismatchError) Error() string {
	return fmt.Sprintf("subscriber %q was created with the table scope %s, and this token's scope on the stream is %s: its cursor has passed rows of its own scope only, so it is read with that scope; use a token with the same tables, or another subscriber name",
		e.Subscriber, e.Stored, e.Given)
}

func (e *ScopeMismatchError) Unwrap() error { return ErrScopeMismatch }

// CheckScope compares scope with the one sub is bound to. A subscriber
// stored before scopes were (none stored) adopts scope. It reports whether
// the subscriber exists; a different scope is a *ScopeMismatchError.
//
// Adopting is a compare-and-swap like every write of the state (update):
// an ack beside it is never written over.
func (c *Cursors) CheckScope(ctx context.Context, stream, sub string, scope *Scope) (found bool, err error) {
	_, err = c.update(ctx, stream, sub, nil, func(cur *SubscriberState) (*SubscriberState, error) {
		found = cur != nil
		switch {
		case cur == nil:
			return nil, nil
		case cur.Scope == nil:
			cur.Scope = scope
			return cur, nil
		case !cur.Scope.Equal(scope):
			return nil, &ScopeMismatchError{Subscriber: sub, Stored: cur.Scope, Given: scope}
		}
		return nil, nil
	})
	return found, err
}
