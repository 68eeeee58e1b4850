package hub

import (
	"context"
	"strconv"
	"testing"
	"time"

	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"

	"github.com/vstream-gateway/vstream-gateway/internal/fakevtgate"
	"github.com/vstream-gateway/vstream-gateway/position"
)

// A subscriber online across a cutover is bridged while it reads on from
// the tail, then acks past the bridge's end: the ack frees the bridge (no
// plan runs at its cursor to do it), so a later reshard's bridge starts at
// the acked cursor, not at the first bridge's end, and spools nothing it
// acked. Seen in the soak: the merge's spool held every row of -80,80-
// since the split, and the subscriber got them again.
func TestAckPastABridgeFreesIt(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	j := e.recordJournal(t)
	e.fake.SetTopology(ks, []string{"-80", "80-"}, []string{"0"})
	e.ack(t, "alice", pos(10))
	e.fake.Push(fakevtgate.Script{Batches: append([][]*binlogdatapb.VEvent{
		s0.Txn(100, pos(11), field(s0), row(s0, "1")),
	}, journalEnd()...)})
	bridge(t, e, j)

	e.ack(t, "alice", after5) // read on from the tail, past the bridge
	st, err := e.hub.Cursors().Get(ctx, e.def.Name, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Bridges) != 0 || len(st.Freed) != 1 || st.Freed[0].FreedAt.IsZero() {
		t.Fatalf("after an ack past the bridge: %d bridges, %d freed (%+v); want it freed", len(st.Bridges), len(st.Freed), st.Freed)
	}
	eff, err := effectivePosition(st)
	if err != nil {
		t.Fatal(err)
	}
	samePos(t, "a later bridge starts at", eff, after5)
}

// A later bridge is captured from the acked cursor when that is past the
// last bridge's end, even if the bridge is still in the chain (stored
// before acks freed bridges).
func TestEffectivePositionPastTheLastBridge(t *testing.T) {
	after, _ := position.Of(targets).Marshal()
	st := &SubscriberState{Name: "alice", VGtid: after5, Bridges: []Bridge{{Journal: "j", Log: "l", After: after}}}
	eff, err := effectivePosition(st)
	if err != nil {
		t.Fatal(err)
	}
	samePos(t, "effective position", eff, after5)
	st.VGtid = pos(10) // behind the bridge: its end
	if eff, err = effectivePosition(st); err != nil {
		t.Fatal(err)
	}
	samePos(t, "effective position behind the bridge", eff, targets)
}

// After a split and a merge back to shard 0, a subscriber online across
// both acked past their bridges, which its acks freed (their spools kept
// for its other readers). Coming back by name at its stored cursor on the
// new 0 it needs no spool: the plan must not walk the freed bridges and
// take the cursor for a position on the old 0 (its GTID sequence past the
// split bridge's start there) and replay them.
func TestPlanSkipsFreedBridgesAtTheStoredCursor(t *testing.T) {
	e := newEnv(t)
	raw := func(v *binlogdatapb.VGtid) []byte { b, _ := position.Of(v).Marshal(); return b }
	newZero := func(n int) *binlogdatapb.VGtid { return fakevtgate.VGtid(ks, "0", "MariaDB/0-4-"+strconv.Itoa(n)) }
	freedAt := time.Now()
	st := &SubscriberState{Name: "alice", VGtid: newZero(30), Freed: []Bridge{
		{Journal: "split", Log: "spool/split", From: raw(pos(10)), After: raw(targets), Events: 1, Seq: 1, FreedAt: freedAt},
		{Journal: "merge", Log: "spool/merge", From: raw(targets), After: raw(newZero(20)), Events: 1, Seq: 1, FreedAt: freedAt},
	}}
	e.putState(t, st)
	srcs, after, err := e.hub.planBridges(t.Context(), e.def, st, newZero(30))
	if err != nil {
		t.Fatal(err)
	}
	if len(srcs) != 0 || after != nil {
		t.Fatalf("the stored cursor past the freed bridges was planned %d spool sources, continuing at %v", len(srcs), after)
	}
}
