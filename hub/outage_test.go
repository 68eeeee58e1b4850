package hub

import (
	"context"
	"errors"
	"testing"
	"time"

	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"
	vtrpcpb "vitess.io/vitess/go/vt/proto/vtrpc"
	"vitess.io/vitess/go/vt/vterrors"

	"github.com/vstream-gateway/vstream-gateway/internal/fakevtgate"
	"github.com/vstream-gateway/vstream-gateway/source"
)

// vtgate restarting under a tail (DESIGN §11 rule 2): the tail's VStream
// breaks, the restarted vtgate first answers NOT_FOUND (its health check
// has not seen the tablet yet), then streams again. The tail resumes from
// its last transaction; its followers wait on the ring and get every
// transaction once, without a VStream of their own.
func TestTailRidesOutVtgateRestart(t *testing.T) {
	e, call := tailEnv(t, pos(10), TailOptions{RingBytes: 1 << 20, RingEntries: 100})
	a := e.open(t, From{})
	b := e.open(t, From{})
	for _, s := range []*Subscription{a, b} {
		samePos(t, "first delivery", next(t, s).VGtid, pos(10))
	}
	e.fake.Push(fakevtgate.Script{Err: vterrors.Errorf(vtrpcpb.Code_NOT_FOUND,
		"failed to get tablet connection to zone1-0000000200: tablet: cell:\"zone1\" uid:200 is either down or nonexistent")},
		fakevtgate.Script{Open: true, Batches: txns(13, 14)})
	call.Answer(t, fakevtgate.Script{Batches: txns(11, 12), Err: vterrors.Errorf(vtrpcpb.Code_UNAVAILABLE, "vtgate shutting down")})
	for name, s := range map[string]*Subscription{"a": a, "b": b} {
		same(t, "reader "+name, read(t, s, 4), want(11, 12, 13, 14))
	}
	samePos(t, "the tail's resumed request", e.fake.Call(t, 2).Req.Vgtid, pos(12))
	if n := e.fake.Calls(); n != 3 {
		t.Fatalf("%d VStream calls, want the tail's three", n)
	}
}

// A reader that starts at "now" while vtgate gives no position (down, or a
// shard's tablet away) is told so after the tail's StartWait, as an
// unavailable upstream: the client gets a 503 to retry, not a wait for a
// second VStream that would hang on the same vtgate.
func TestNowWithoutPositionUnavailable(t *testing.T) {
	e := newEnv(t, WithTails(TailOptions{RingBytes: 1 << 20, RingEntries: 100, Idle: time.Minute, StartWait: 200 * time.Millisecond}))
	e.fake.Push(fakevtgate.Script{Open: true, Batches: [][]*binlogdatapb.VEvent{}})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	s, err := e.hub.Open(ctx, e.def, From{})
	if err == nil {
		s.Close()
		t.Fatal("Open succeeded without a position")
	}
	var ue *source.UpstreamError
	if !errors.As(err, &ue) || !source.Unavailable(err) {
		t.Fatalf("Open: %v (%T), want an unavailable *source.UpstreamError", err, err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("the answer took %v, want about the 200ms StartWait", took)
	}
}
