package hub

import (
	"strconv"
	"testing"
	"time"

	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"

	"github.com/vstream-gateway/vstream-gateway/internal/fakevtgate"
	"github.com/vstream-gateway/vstream-gateway/position"
)

// A later bridge is captured from the acked cursor when that is past the
// last bridge's end, even if the bridge is still in the chain (stored
// before acks freed bridges).
func TestEffectivePositionPastTheLastBridge(t *testing.T) {
	after, _ := position.Of(targets).Marshal()
	st := &SubscriberState{Name: "alice", VGtid: after5, Bridges: []Bridge{{Journal: "j", Log: "l", After: after}}}
	eff, err := st.EffectivePosition()
	if err != nil {
		t.Fatal(err)
	}
	samePos(t, "effective position", eff, after5)
	st.VGtid = pos(10) // behind the bridge: its end
	if eff, err = st.EffectivePosition(); err != nil {
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
