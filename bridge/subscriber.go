package bridge

import (
	"context"
	"fmt"
	"time"

	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"

	"github.com/vstream-gateway/vstream-gateway/event"
	"github.com/vstream-gateway/vstream-gateway/hub"
	"github.com/vstream-gateway/vstream-gateway/position"
	"github.com/vstream-gateway/vstream-gateway/reshard"
	"github.com/vstream-gateway/vstream-gateway/store"
	"github.com/vstream-gateway/vstream-gateway/streams"
)

// Subscriber bridges one subscriber of def across journal j if its
// position is behind the cutover. It is safe to call again (a failed or
// interrupted bridge restarts from scratch).
func (b *Bridger) Subscriber(ctx context.Context, def *streams.Definition, sub string, j *reshard.Journal) (*Status, error) {
	return b.subscriber(ctx, def, sub, j, nil)
}

// subscriber is Subscriber; with fence, the spool and the subscriber's
// state are written only while that lease is held (a replica that lost it
// cannot append to a spool another one is writing).
func (b *Bridger) subscriber(ctx context.Context, def *streams.Definition, sub string, j *reshard.Journal, fence *store.Lease) (*Status, error) {
	st, err := b.cursors.Get(ctx, def.Name, sub)
	if err != nil {
		return nil, err
	}
	from, err := st.EffectivePosition()
	if err != nil {
		return nil, err
	}
	status := &Status{Journal: j.Key, Stream: def.Name, Subscriber: sub, Started: time.Now().UTC()}
	if b.settled(ctx, st, from, j, status) {
		return status, nil
	}
	status.State = "in_progress"
	b.log.Debug("bridge capture starts", "stream", def.Name, "subscriber", sub, "journal", j.Key,
		"from", position.Of(from).String(), "cutover", j.LocalPosition().String())
	b.saveStatus(ctx, j.Keyspace, status)

	log := fmt.Sprintf("spool/%s/%s/%s", def.Name, sub, j.Key)
	after, err := b.capture(ctx, def, from, j, log, status, fence)
	status.Finished = time.Now().UTC()
	if err != nil {
		status.State, status.Error = "failed", err.Error()
		b.saveStatus(ctx, j.Keyspace, status)
		b.st.DeleteLog(context.WithoutCancel(ctx), log)
		return status, err
	}
	br := hub.Bridge{Journal: j.Key, Log: log, From: marshal(from), After: marshal(after)}
	return status, b.record(ctx, def, sub, j, from, br, status, fence)
}

// settled reports whether the subscriber whose state is st, starting at
// from, needs no capture across j: bridged already, or not behind the
// cutover. status says which.
func (b *Bridger) settled(ctx context.Context, st *hub.SubscriberState, from *binlogdatapb.VGtid, j *reshard.Journal, status *Status) bool {
	for _, br := range st.Bridges {
		if br.Journal == j.Key {
			status.State, status.Events, status.Bytes = "done", br.Events, br.Bytes
			b.settleStale(ctx, j.Keyspace, status)
			return true
		}
	}
	if !reshard.BehindCutover(from, j) {
		status.State = "not_needed"
		b.settleStale(ctx, j.Keyspace, status)
		return true
	}
	return false
}

// record adds bridge br, captured from `from` (its journal, spool and
// positions set), to the subscriber's state as the state is then
// (hub.Cursors.AddBridge), and saves its status.
func (b *Bridger) record(ctx context.Context, def *streams.Definition, sub string, j *reshard.Journal, from *binlogdatapb.VGtid,
	br hub.Bridge, status *Status, fence *store.Lease) error {
	// Append without values reads the spool's last sequence number.
	seq, err := b.st.Append(ctx, br.Log)
	if err != nil {
		return err
	}
	br.Events, br.Bytes, br.Seq, br.Notice = status.Events, status.Bytes, seq, cutoverNotice(j)
	fit, err := b.cursors.AddBridge(ctx, def.Name, sub, from, j, br, fence)
	if err != nil {
		return err
	}
	if fit != hub.BridgeAdded {
		status.State = "not_needed"
		b.saveStatus(ctx, j.Keyspace, status)
		if fit == hub.BridgeUnneeded {
			b.st.DeleteLog(ctx, br.Log)
		}
		return nil
	}
	status.State = "done"
	b.saveStatus(ctx, j.Keyspace, status)
	b.log.Info("subscriber bridged across a cutover", "kind", cutoverKind(j), "stream", def.Name, "subscriber", sub,
		"journal", j.Key, "from", j.From(), "to", j.To(), "events", status.Events, "bytes", status.Bytes,
		"duration", status.Finished.Sub(status.Started))
	return nil
}

func marshal(v *binlogdatapb.VGtid) []byte {
	raw, _ := position.Of(v).Marshal()
	return raw
}

// cutoverNotice is the control event of j that readers online across it
// get: `moved` for a MoveTables cutover (as upstream/move.go emits it),
// `reshard` otherwise (as the hub's exact rewrites do).
func cutoverNotice(j *reshard.Journal) *hub.BridgeNotice {
	if j.Moves() {
		return &hub.BridgeNotice{Type: event.TypeMoved, Keyspace: j.Keyspace, Fields: map[string]any{
			"tables": j.Tables, "from": j.Keyspace, "to": j.TargetKeyspace, "journal": j.Key,
		}}
	}
	return &hub.BridgeNotice{Type: event.TypeReshard, Keyspace: j.Keyspace, Fields: map[string]any{
		"from": j.From(), "to": j.To(), "journal_id": fmt.Sprint(j.ID),
	}}
}

func cutoverKind(j *reshard.Journal) string {
	if j.Moves() {
		return "movetables"
	}
	return "reshard"
}
