package source

import (
	"context"
	"errors"
	"io"
	"strings"

	vtrpcpb "vitess.io/vitess/go/vt/proto/vtrpc"
	"vitess.io/vitess/go/vt/vterrors"
)

// Retryable reports whether a VStream error is transient, DESIGN §11 rule 1:
// whether the same request, from the same position, can succeed later. What is not is an
// error that names the position or the filter as the problem: retrying
// would fail the same way, forever and silently.
//
// vtgate's codes alone do not draw that line (vtgate/vstream_manager.go,
// discovery/tablet_error_action.go):
//
//   - NOT_FOUND is what a vtgate that is starting up answers while its
//     health check has not yet seen the tablet its picker chose ("failed to
//     get tablet connection to …: tablet … is either down or nonexistent");
//     a tablet that restarts does the same. Transient.
//   - FAILED_PRECONDITION is vtgate's answer to a VGTID naming a shard
//     that no longer exists ("shard provided in VGTID, X, not found in the
//     Y keyspace", after Reshard complete: permanent, the caller rebuilds
//     the position, DESIGN §4), but also a tablet's "wrong tablet type"
//     during a reparent or restart, passed on once vtgate's own three
//     retries are spent: transient. vttablet's "column … not found in
//     table …" is the filter: permanent.
//   - INVALID_ARGUMENT and the like are the request itself.
//
// Everything else (UNAVAILABLE, CANCELED from vtgate's 90-second tablet
// search, CLUSTER_EVENT, a stream ended by EOF) is transient.
func Retryable(err error) bool {
	if err == nil || errors.Is(err, io.EOF) {
		return true
	}
	var pe *ProtocolError
	if errors.As(err, &pe) {
		return true
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		// Our own context is checked by the caller; these come from vtgate
		// (e.g. "failed to find a PRIMARY tablet … context has expired").
		return true
	}
	if _, _, gone := MissingShard(err); gone {
		return false
	}
	msg := err.Error()
	for _, s := range permanentMessages {
		if strings.Contains(msg, s) {
			return false
		}
	}
	switch vterrors.Code(err) {
	case vtrpcpb.Code_INVALID_ARGUMENT, vtrpcpb.Code_PERMISSION_DENIED, vtrpcpb.Code_UNAUTHENTICATED,
		vtrpcpb.Code_UNIMPLEMENTED, vtrpcpb.Code_ALREADY_EXISTS, vtrpcpb.Code_OUT_OF_RANGE:
		return false
	}
	return true
}

// permanentMessages are errors that no retry fixes, whatever their code:
// the filter kills the stream at the first row, or no longer fits the
// table.
var permanentMessages = []string{
	"failed to build table replication plan",
	"Query was empty",
	"not found in the",
	// vttablet's "unknown table T in schema": permanent for Retryable,
	// but a Reader first asks vtgate whether T is gone (UnknownTable,
	// tablemissing.go) and retries while it is not.
	"unknown table",
	// vttablet/tabletserver/vstreamer/planbuilder.go, FAILED_PRECONDITION.
	"not found in table",
	"cannot use column names in vstream filter",
	// The keyspace has no serving graph in vtgate's cell: it does not
	// exist (vtgate/vstream_manager.go resolveParams, code UNKNOWN).
	"fetch error: node doesn't exist",
}

// ErrVtgateTimeout is vtgate not answering in time something a client
// waits for (a position for "now"): Unavailable reports it. It is not
// store.ErrUnavailable, the store being down.
var ErrVtgateTimeout = errors.New("vtgate did not answer in time")

// ErrClientClosed is what a reader opened on a closed Client reports.
var ErrClientClosed = errors.New("source: the vtgate client is closed")

// UpstreamError is vtgate failing a request the gateway made on a client's
// behalf: the position a new reader starts from, a schema check. Op says
// what was asked. Callers answering clients tell two cases apart with
// Unavailable: vtgate unreachable or too slow (the client may retry), or
// vtgate refusing the request.
type UpstreamError struct {
	Op  string
	Err error
}

func (e *UpstreamError) Error() string { return "vtgate: " + e.Op + ": " + e.Err.Error() }
func (e *UpstreamError) Unwrap() error { return e.Err }

// Unavailable reports whether err means that vtgate could not be reached or
// did not answer in time, rather than that it refused the request. Calls
// wait for the connection (vtgateconn dials with WaitForReady), so a vtgate
// that is down shows as the caller's deadline passing.
func Unavailable(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrVtgateTimeout) {
		return true
	}
	var coded interface{ ErrorCode() vtrpcpb.Code }
	if errors.As(err, &coded) {
		switch coded.ErrorCode() {
		case vtrpcpb.Code_UNAVAILABLE, vtrpcpb.Code_DEADLINE_EXCEEDED:
			return true
		}
	}
	return false
}

// MissingShard extracts the shard vtgate named in a "shard provided in
// VGTID, X, not found in the Y keyspace" error.
func MissingShard(err error) (keyspace, shard string, ok bool) {
	if err == nil {
		return "", "", false
	}
	msg := err.Error()
	const a, b, c = "shard provided in VGTID, ", ", not found in the ", " keyspace"
	i := strings.Index(msg, a)
	if i < 0 {
		return "", "", false
	}
	rest := msg[i+len(a):]
	j := strings.Index(rest, b)
	if j < 0 {
		return "", "", false
	}
	shard = rest[:j]
	rest = rest[j+len(b):]
	k := strings.Index(rest, c)
	if k < 0 {
		return "", "", false
	}
	return rest[:k], shard, true
}
