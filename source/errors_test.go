package source_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	vtrpcpb "vitess.io/vitess/go/vt/proto/vtrpc"
	"vitess.io/vitess/go/vt/vterrors"

	"github.com/vstream-gateway/vstream-gateway/source"
)

// Unavailable tells vtgate unreachable or too slow (retry later) from
// vtgate refusing, through the wrapping callers add.
func TestUnavailable(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{vterrors.Errorf(vtrpcpb.Code_UNAVAILABLE, "connection refused"), true},
		{vterrors.Errorf(vtrpcpb.Code_DEADLINE_EXCEEDED, "context deadline exceeded"), true},
		{context.DeadlineExceeded, true},
		{fmt.Errorf("%w: no position after 10s", source.ErrVtgateTimeout), true},
		{&source.UpstreamError{Op: "list keyspaces", Err: vterrors.Errorf(vtrpcpb.Code_UNAVAILABLE, "x")}, true},
		{fmt.Errorf("webhook: %w", &source.UpstreamError{Op: "current position", Err: context.DeadlineExceeded}), true},
		{vterrors.Errorf(vtrpcpb.Code_PERMISSION_DENIED, "not authorized"), false},
		{vterrors.Errorf(vtrpcpb.Code_NOT_FOUND, "VT05003: unknown database 'nosuch' in vschema"), false},
		{errors.New("store: connection refused"), false},
		{nil, false},
	} {
		if got := source.Unavailable(c.err); got != c.want {
			t.Errorf("Unavailable(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
