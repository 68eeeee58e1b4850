package source

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
)

// ErrStalled is a VStream on which vtgate sent nothing, not even a
// heartbeat, for the stall timeout (DESIGN §11 rule 5): the network to
// vtgate drops packets, or vtgate hangs. It is transient: the reader
// cancels the stream and opens it again from its last whole transaction.
var ErrStalled = errors.New("source: vtgate sent nothing, not even a heartbeat")

// StallError is ErrStalled with what was measured.
type StallError struct {
	// Since is when the reader last received anything (or opened the
	// stream): the silence, and the outage, began then.
	Since time.Time
	// Timeout is the stall timeout that expired.
	Timeout time.Duration
}

func (e *StallError) Error() string {
	return fmt.Sprintf("%v for %v (stall timeout %v)", ErrStalled, time.Since(e.Since).Round(time.Millisecond), e.Timeout)
}

func (e *StallError) Unwrap() error { return ErrStalled }

// stallWatch cancels a VStream whose Recv waits longer than the timeout.
//
// Only the wait in Recv counts: while the reader is held up by its own
// consumer (the read-ahead budget, a full queue) it does not read, and
// vtgate, paused by gRPC flow control, cannot send either — that silence
// is ours, not a stall. vtgate sends a heartbeat after every heartbeat
// interval without events, whatever its shards do (vstream_manager.go
// sendEvents), so a healthy stream never waits in Recv much longer than
// one interval.
type stallWatch struct {
	timeout time.Duration
	cancel  context.CancelCauseFunc

	mu    sync.Mutex
	since time.Time // start of the current wait
	timer *time.Timer
	fired bool
}

// watchStall returns a watch that cancels with a *StallError, or nil when
// timeout is 0 (stall detection off).
func watchStall(timeout time.Duration, cancel context.CancelCauseFunc) *stallWatch {
	if timeout <= 0 {
		return nil
	}
	w := &stallWatch{timeout: timeout, cancel: cancel}
	w.timer = time.AfterFunc(time.Hour, w.fire)
	w.timer.Stop()
	return w
}

func (w *stallWatch) fire() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fired {
		return
	}
	w.fired = true
	w.cancel(&StallError{Since: w.since, Timeout: w.timeout})
}

// waiting starts a wait for vtgate (a Recv, or the call that opens the
// stream) that began at since.
func (w *stallWatch) waiting(since time.Time) {
	if w == nil {
		return
	}
	w.mu.Lock()
	w.since = since
	w.mu.Unlock()
	w.timer.Reset(w.timeout - time.Since(since))
}

// received ends a wait; it reports false when the watch fired first, in
// which case the stream is cancelled and what Recv returned must not be
// used (its transaction may be incomplete: the reader resumes from its last
// whole one).
func (w *stallWatch) received() bool {
	if w == nil {
		return true
	}
	w.timer.Stop()
	w.mu.Lock()
	defer w.mu.Unlock()
	return !w.fired
}

func (w *stallWatch) stop() {
	if w != nil {
		w.timer.Stop()
	}
}

// Keepalive of the connection to vtgate. A stall detected by a reader
// cancels its stream, but the stream opened next goes over the same HTTP/2
// connection, which gRPC still takes for healthy: only keepalive tears a
// connection whose packets are dropped down, after which gRPC dials again.
// After keepaliveTime without reading anything gRPC pings vtgate and closes
// the connection when no answer comes within keepaliveTimeout. Vitess's own
// client default is 10 s + 10 s; vtgate refuses pings more frequent than
// every 10 s (--grpc-server-keepalive-enforcement-policy-min-time: it
// closes the connection with "too_many_pings"), and it counts pings on a
// connection without streams as abuse (permit-without-stream is off by
// default), so idle connections are not pinged: every stream the gateway
// runs receives heartbeats, which keep the connection busy anyway.
const (
	keepaliveTime    = 10 * time.Second
	keepaliveTimeout = 5 * time.Second
)

func keepaliveOptions() grpc.DialOption {
	return grpc.WithKeepaliveParams(keepalive.ClientParameters{
		Time:                keepaliveTime,
		Timeout:             keepaliveTimeout,
		PermitWithoutStream: false,
	})
}
