package hub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"

	"github.com/vstream-gateway/vstream-gateway/event"
	"github.com/vstream-gateway/vstream-gateway/position"
	"github.com/vstream-gateway/vstream-gateway/reshard"
	"github.com/vstream-gateway/vstream-gateway/source"
	"github.com/vstream-gateway/vstream-gateway/store"
	"github.com/vstream-gateway/vstream-gateway/streams"
)

// Bridging (DESIGN §4 rule 3). A named subscriber that went away before a
// reshard cutover holds a position on the old shards behind the journal's
// local_position. The events between its position and the cutover exist
// only on the old shards, which `Reshard complete` deletes, often seconds
// after SwitchTraffic. So as soon as a journal is recorded, the gateway
// streams each such subscriber's remaining old-shard events (stop_on_reshard)
// into a spool in the store and records "spool, then the journal's target
// positions" in the subscriber's state. On reconnect it replays the spool
// and continues on the new shards: nothing lost, nothing repeated.

// ErrSpoolFull is reported when a bridge would exceed the spool bound; the
// subscriber is left as it was and resumes with its stream's on_gap policy
// if the old shards are gone when it returns.
var ErrSpoolFull = errors.New("bridge spool limit exceeded")

// BridgeStatus is the record of one bridge, for GET /v1/reshards.
type BridgeStatus struct {
	Journal    string    `json:"journal"`
	Stream     string    `json:"stream"`
	Subscriber string    `json:"subscriber"`
	State      string    `json:"state"` // in_progress | done | failed | not_needed
	Events     int       `json:"events"`
	Bytes      int       `json:"bytes"`
	Error      string    `json:"error,omitempty"`
	Started    time.Time `json:"started"`
	Finished   time.Time `json:"finished,omitzero"`
}

func bridgeNS(keyspace string) string { return "bridges/" + keyspace }

// effectivePosition is where a subscriber's state ends: after its last
// bridge if it has any and its acked position is not past it, else its
// acked position. A subscriber online across a cutover acks past the
// bridge made for it while it read on: a later bridge captured from the
// bridge's end would spool again what it acked (and replay it).
func effectivePosition(st *SubscriberState) (*binlogdatapb.VGtid, error) {
	if n := len(st.Bridges); n > 0 {
		p, err := position.Unmarshal(st.Bridges[n-1].After)
		if err != nil {
			return nil, err
		}
		if atOrPast(position.Of(st.VGtid), p) {
			return st.VGtid, nil
		}
		return p.VGtid(), nil
	}
	return st.VGtid, nil
}

// atOrPast reports whether at is at or after p on p's shards (the same
// shards: positions on other shards do not compare).
func atOrPast(at, p position.Position) bool {
	o := at.Compare(p)
	return at.Identical(p) || o == position.Equal || o == position.After
}

// BridgeSubscriber bridges one subscriber of def across journal j if its
// position is behind the cutover. It is safe to call again (a failed or
// interrupted bridge restarts from scratch).
func (h *Hub) BridgeSubscriber(ctx context.Context, def *streams.Definition, sub string, j *reshard.Journal) (*BridgeStatus, error) {
	return h.bridgeSubscriber(ctx, def, sub, j, nil)
}

// bridgeSubscriber is BridgeSubscriber; with fence, the spool and the
// subscriber's state are written only while that lease is held (a replica
// that lost it cannot append to a spool another one is writing).
func (h *Hub) bridgeSubscriber(ctx context.Context, def *streams.Definition, sub string, j *reshard.Journal, fence *store.Lease) (*BridgeStatus, error) {
	st, err := h.cursors.Get(ctx, def.Name, sub)
	if err != nil {
		return nil, err
	}
	from, err := effectivePosition(st)
	if err != nil {
		return nil, err
	}
	status := &BridgeStatus{Journal: j.Key, Stream: def.Name, Subscriber: sub, Started: time.Now().UTC()}
	for _, b := range st.Bridges {
		if b.Journal == j.Key {
			status.State, status.Events, status.Bytes = "done", b.Events, b.Bytes
			h.settleStale(ctx, j.Keyspace, status)
			return status, nil
		}
	}
	if !reshard.BehindCutover(from, j) {
		status.State = "not_needed"
		h.settleStale(ctx, j.Keyspace, status)
		return status, nil
	}
	status.State = "in_progress"
	h.log.Debug("bridge capture starts", "stream", def.Name, "subscriber", sub, "journal", j.Key,
		"from", position.Of(from).String(), "cutover", j.LocalPosition().String())
	// Statuses are kept by the journal's keyspace: a stream whose tables
	// moved reads another keyspace now (DESIGN §4.1).
	h.saveBridgeStatus(ctx, j.Keyspace, status)

	log := fmt.Sprintf("spool/%s/%s/%s", def.Name, sub, j.Key)
	after, err := h.capture(ctx, def, from, j, log, status, fence)
	status.Finished = time.Now().UTC()
	if err != nil {
		status.State, status.Error = "failed", err.Error()
		h.saveBridgeStatus(ctx, j.Keyspace, status)
		h.st.DeleteLog(context.WithoutCancel(ctx), log)
		return status, err
	}
	// Append without values reads the spool's last sequence number.
	seq, err := h.st.Append(ctx, log)
	if err != nil {
		return status, err
	}
	fromRaw, _ := position.Of(from).Marshal()
	afterRaw, _ := position.Of(after).Marshal()
	b := Bridge{Journal: j.Key, Log: log, From: fromRaw, After: afterRaw, Events: status.Events, Bytes: status.Bytes,
		Seq: seq, Notice: cutoverNotice(j)}
	fit, err := h.cursors.addBridge(ctx, def.Name, sub, from, j, b, fence)
	if err != nil {
		return status, err
	}
	if fit != bridgeAdded {
		status.State = "not_needed"
		h.saveBridgeStatus(ctx, j.Keyspace, status)
		if fit == bridgeUnneeded {
			h.st.DeleteLog(ctx, log)
		}
		return status, nil
	}
	status.State = "done"
	h.saveBridgeStatus(ctx, j.Keyspace, status)
	h.log.Info("subscriber bridged across a cutover", "kind", cutoverKind(j), "stream", def.Name, "subscriber", sub,
		"journal", j.Key, "from", j.From(), "to", j.To(), "events", status.Events, "bytes", status.Bytes,
		"duration", status.Finished.Sub(status.Started))
	return status, nil
}

// cutoverNotice is the control event of j that readers online across it
// get: `moved` for a MoveTables cutover (as upstream/move.go emits it),
// `reshard` otherwise (as plan.go's exact rewrites do).
func cutoverNotice(j *reshard.Journal) *BridgeNotice {
	if j.Moves() {
		return &BridgeNotice{Type: event.TypeMoved, Keyspace: j.Keyspace, Fields: map[string]any{
			"tables": j.Tables, "from": j.Keyspace, "to": j.TargetKeyspace, "journal": j.Key,
		}}
	}
	return &BridgeNotice{Type: event.TypeReshard, Keyspace: j.Keyspace, Fields: map[string]any{
		"from": j.From(), "to": j.To(), "journal_id": fmt.Sprint(j.ID),
	}}
}

func cutoverKind(j *reshard.Journal) string {
	if j.Moves() {
		return "movetables"
	}
	return "reshard"
}

func (h *Hub) saveBridgeStatus(ctx context.Context, keyspace string, s *BridgeStatus) {
	b, _ := json.Marshal(s)
	key := s.Journal + "/" + s.Stream + "/" + s.Subscriber
	if err := h.st.Put(context.WithoutCancel(ctx), bridgeNS(keyspace), key, b); err != nil {
		h.log.Warn("saving bridge status failed", "key", key, "err", err)
	}
}

// settleStale records s in place of an in_progress status left by a
// replica that died mid-bridge (the journal watcher's next holder bridges
// again, DESIGN §4 rule 3): /v1/reshards would show it running forever.
// A subscriber that needs no bridge and has no status gets none (most
// subscribers of a stream read across a cutover themselves).
func (h *Hub) settleStale(ctx context.Context, keyspace string, s *BridgeStatus) {
	raw, err := h.st.Get(ctx, bridgeNS(keyspace), s.Journal+"/"+s.Stream+"/"+s.Subscriber)
	if err != nil {
		return
	}
	var old BridgeStatus
	if json.Unmarshal(raw, &old) != nil || old.State != "in_progress" {
		return
	}
	s.Started, s.Finished = old.Started, time.Now().UTC()
	h.saveBridgeStatus(ctx, keyspace, s)
}

// BridgeStatuses lists the bridges recorded for keyspace.
func (h *Hub) BridgeStatuses(ctx context.Context, keyspace string) ([]*BridgeStatus, error) {
	recs, err := h.st.List(ctx, bridgeNS(keyspace))
	if err != nil {
		return nil, err
	}
	out := make([]*BridgeStatus, 0, len(recs))
	for _, r := range recs {
		var s BridgeStatus
		if json.Unmarshal(r.Value, &s) == nil {
			out = append(out, &s)
		}
	}
	return out, nil
}

// BridgeAll bridges every named subscriber of the streams on j's keyspace
// that is behind j's cutover. Subscribers are bridged concurrently (a few
// at a time): the old shards may be deleted seconds after the switch.
// With fence (the journal watcher's lease) spools and subscriber states are
// written only while that lease is held.
func (h *Hub) BridgeAll(ctx context.Context, defs []*streams.Definition, j *reshard.Journal, fence *store.Lease) {
	h.bridgeAll(ctx, defs, j, fence)
}

// bridgeAll is BridgeAll, its writes fenced by fence when not nil.
func (h *Hub) bridgeAll(ctx context.Context, defs []*streams.Definition, j *reshard.Journal, fence *store.Lease) {
	if !j.Moves() {
		h.awaitSwitch(ctx, j)
	}
	sem := make(chan struct{}, 4)
	var wg sync.WaitGroup
	for _, def := range defs {
		if !Crosses(def, j) {
			continue
		}
		subs, err := h.cursors.List(ctx, def.Name)
		if err != nil {
			h.log.Warn("bridging: listing subscribers failed", "stream", def.Name, "err", err)
			continue
		}
		for _, s := range subs {
			wg.Add(1)
			sem <- struct{}{}
			go func(def *streams.Definition, sub string) {
				defer wg.Done()
				defer func() { <-sem }()
				if _, err := h.bridgeSubscriber(ctx, def, sub, j, fence); err != nil {
					h.log.Error("bridging a subscriber across a cutover failed: it will get its stream's on_gap policy if the old shards (or moved tables) are deleted before it returns",
						"stream", def.Name, "subscriber", sub, "journal", j.Key, "err", err)
				}
			}(def, s.Name)
		}
	}
	wg.Wait()
}

// Crosses reports whether def's subscribers may be behind j: a reshard of
// its keyspace, or a MoveTables cutover it followed (DESIGN §4.1).
func Crosses(def *streams.Definition, j *reshard.Journal) bool {
	if !j.Moves() {
		return def.Keyspace == j.Keyspace
	}
	for _, m := range def.Moves {
		if m.Journal == j.Key {
			return true
		}
	}
	// Not moved yet: it will be once the journal is handled
	// (server/moves.go), and its subscribers are already behind it.
	follows, _ := def.Follows(j.Keyspace, j.Tables)
	return follows && !def.Moved().After(j.SeenAt)
}

// NeedsOldShards reports whether subscriber s still needs j's old shards:
// its position (after any bridges) is behind the cutover and no bridge
// carries it across.
func (h *Hub) NeedsOldShards(s *SubscriberState, j *reshard.Journal) (bool, string) {
	pos, err := effectivePosition(s)
	if err != nil {
		return true, "unreadable subscriber state"
	}
	if reshard.BehindCutover(pos, j) {
		return true, "cursor is behind the cutover on the old shards and not bridged"
	}
	return false, ""
}

// awaitSwitch waits (briefly) until vtgate's serving graph no longer lists
// j's participants. The JOURNAL is written in the middle of SwitchTraffic,
// while the old primary is not serving and vtgate does not yet consider
// the keyspace resharded; a VStream opened then searches in vain for a
// serving primary. Once the switch is visible vtgate accepts the
// non-serving old primary, which is what a bridge must read.
func (h *Hub) awaitSwitch(ctx context.Context, j *reshard.Journal) {
	if h.rebuilder == nil {
		return
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		topo, err := h.rebuilder.Topology(ctx, j.Keyspace)
		if err == nil {
			switched := true
			for _, p := range j.Participants {
				if topo.State(j.Keyspace, p) == source.ShardServing {
					switched = false
				}
			}
			if switched {
				return
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
}
