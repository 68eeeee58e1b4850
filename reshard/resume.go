package reshard

import (
	"context"
	"log/slog"
	"time"

	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"

	"github.com/vstream-gateway/vstream-gateway/metrics"
	"github.com/vstream-gateway/vstream-gateway/position"
	"github.com/vstream-gateway/vstream-gateway/source"
	"github.com/vstream-gateway/vstream-gateway/store"
)

// resumeFrom is where the watcher of ks streams from: its saved position,
// rebuilt across reshards when its shards are gone (DESIGN §4 rule 2).
//
// The saved position names deleted shards when the keyspace was resharded
// and completed while no replica watched it (every replica down for longer
// than the lease time), or when the watcher's stream failed across a
// cutover and the old shards were deleted before it reopened. Jumping to
// the current position then would step over the cutover's journal: nothing
// would record it, no subscriber behind it would be bridged, and nobody
// would know. So:
//
//   - shards all serving, or still readable: the saved position as it is
//     (vtgate walks old shards to their journal);
//   - journals recorded by any reader continue it: the rebuilt position,
//     and every journal followed is handed on for bridging as if the
//     watcher had seen it (subscribers past it need nothing; one behind it
//     gets a failed bridge in GET /v1/reshards, since its old shards are
//     gone);
//   - otherwise a journal was missed for good: the gap is recorded (GET
//     /v1/reshards, type "unrecorded"), counted, logged as an error, and
//     the gateway reports itself degraded until an operator dismisses it;
//     only then does the watcher go on from the current position.
//
// A cutover's journal is written on its source shards' primaries, and a
// Reshard's sources are the shards `complete` deletes: once they are gone
// no vtgate or vtctld call can read it again. (MoveTables journals stay
// on the source keyspace, which lives on; the Mover reads those.)
func (w *Watcher) resumeFrom(ctx context.Context, ks string, l store.Lease, log *slog.Logger) (*binlogdatapb.VGtid, error) {
	saved := w.saved(ctx, ks)
	if saved == nil {
		return source.NowPosition(ks), nil
	}
	topo, err := w.src.Topology(ctx, ks)
	if err != nil {
		// vtgate judges the position itself; a deleted shard fails the
		// stream, and the next attempt asks for the topology again.
		log.Warn("journal watcher: topology unavailable; resuming from the saved position as it is", "err", err)
		return saved, nil
	}
	journals, err := w.reg.List(ctx, ks)
	if err != nil {
		return nil, err
	}
	byKeyspace := map[string][]*Journal{ks: journals}
	if AllServing(saved, topo, byKeyspace) {
		return saved, nil
	}
	d := Decide(saved, topo, byKeyspace)
	switch d.Outcome {
	case Exact:
		log.Warn("journal watcher position was on deleted shards; rebuilt from recorded journals",
			"journals", len(d.Applied), "from", position.Of(saved).String(), "to", position.Of(d.VGtid).String())
		for _, j := range d.Applied {
			w.onJournal(ctx, j, l)
		}
		return d.VGtid, nil
	case Resync:
		if err := w.recordGap(ctx, ks, saved, d.Missing, topo, log); err != nil {
			return nil, err
		}
		return source.NowPosition(ks), nil
	default:
		return saved, nil
	}
}

// saved is the watcher's saved position of ks, nil if none.
func (w *Watcher) saved(ctx context.Context, ks string) *binlogdatapb.VGtid {
	b, err := w.st.Get(ctx, positionNS, ks)
	if err != nil {
		return nil
	}
	p, err := position.Unmarshal(b)
	if err != nil || p.IsZero() {
		return nil
	}
	return p.VGtid()
}

// recordGap records, counts and logs a reshard whose journal the watcher
// missed for good, then drops its saved position (the next one saved is
// on the shards that serve now).
func (w *Watcher) recordGap(ctx context.Context, ks string, saved *binlogdatapb.VGtid, missing []string,
	topo source.Topology, log *slog.Logger) error {
	g := &Gap{Keyspace: ks, Missing: missing, From: position.Of(saved).String(), Serving: topo.Serving(ks),
		FoundAt: time.Now().UTC(), Holder: w.holder,
		Message: "the keyspace was resharded and its old shards deleted while no gateway replica watched it, and no reader recorded the cutover's journal: named subscribers behind the cutover resume with their stream's on_gap (resync or fail)"}
	if err := w.reg.RecordGap(ctx, g); err != nil {
		return err
	}
	metrics.JournalGap(ks)
	log.Error("journal watcher position is on deleted shards and no recorded journal continues it: a reshard's journal was missed; recorded as an unrecorded gap (GET /v1/reshards) and going on from the current position",
		"missing", missing, "from", g.From, "serving", g.Serving, "gap", g.ID)
	w.st.Delete(ctx, positionNS, ks)
	return nil
}
