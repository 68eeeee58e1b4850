package hub

import (
	"context"
	"fmt"
	"time"

	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"

	"github.com/vstream-gateway/vstream-gateway/event"
	"github.com/vstream-gateway/vstream-gateway/position"
	"github.com/vstream-gateway/vstream-gateway/reshard"
	"github.com/vstream-gateway/vstream-gateway/source"
	"github.com/vstream-gateway/vstream-gateway/streams"
)

// Rebuilder gives the hub what cursor rebuilds need (DESIGN §4 rule 4):
// the shards vtgate can stream and the recorded journals. *source.Client
// and *reshard.Registry provide them in production.
type Rebuilder interface {
	Topology(ctx context.Context, keyspaces ...string) (source.Topology, error)
	Journals(ctx context.Context, keyspace string) ([]*reshard.Journal, error)
}

// ClusterRebuilder is the production Rebuilder: vtgate's serving graph as
// the source client reads it, and the journals the registry recorded.
type ClusterRebuilder struct {
	Src *source.Client
	Reg *reshard.Registry
}

// Topology reads vtgate's serving graph of keyspaces.
func (r ClusterRebuilder) Topology(ctx context.Context, keyspaces ...string) (source.Topology, error) {
	return r.Src.Topology(ctx, keyspaces...)
}

// Journals lists the recorded journals of keyspace.
func (r ClusterRebuilder) Journals(ctx context.Context, keyspace string) ([]*reshard.Journal, error) {
	return r.Reg.List(ctx, keyspace)
}

// RebuildObserver is told every rebuild outcome (metrics).
type RebuildObserver func(stream string, outcome reshard.Outcome)

// plan decides what a subscription reads before its live VStream: a
// subscriber's bridge spools, reshard notices for journals an exact rewrite
// followed, or a resync notice and a fresh snapshot. It returns the source
// chain. st is the named subscriber's state, if any.
//
// skip is how many events of the transaction after pos the reader has (a
// position inside a chunked transaction, DESIGN §3.1): they are dropped
// when the plan reads from pos itself (or its spools). A rebuilt position
// does not start at that transaction: the reader gets what follows it
// whole, its cursor before it being the unit.
func (h *Hub) plan(ctx context.Context, def *streams.Definition, pos *binlogdatapb.VGtid, st *SubscriberState, skip int) (txnSource, error) {
	p := &planned{live: pos, outcome: reshard.Passthrough}
	if position.Of(pos).AtOpen() {
		if err := h.planStart(ctx, def, p); err != nil {
			return nil, err
		}
	}
	if st != nil && st.spooled() {
		if err := h.planSpools(ctx, def, st, pos, p); err != nil {
			return nil, err
		}
	}
	if resynced, err := h.planMovedAway(ctx, def, p); err != nil {
		return nil, err
	} else if resynced {
		return chain(append(p.srcs, h.follow(def, p.live))...), nil
	}
	if err := h.planRebuild(ctx, def, p); err != nil {
		return nil, err
	}
	src := chain(append(p.srcs, h.follow(def, p.live))...)
	if skip > 0 {
		if p.outcome != reshard.Passthrough && p.outcome != reshard.Bridged {
			h.log.Info("cursor inside a transaction rebuilt: the reader resumes before it", "stream", def.Name, "outcome", p.outcome)
			return src, nil
		}
		src = &skipSource{txnSource: src, n: skip}
	}
	return src, nil
}

// planned is a plan being made: the sources read before the live one, the
// position the live one starts at, and how the cursor was continued.
type planned struct {
	srcs    []txnSource
	live    *binlogdatapb.VGtid
	outcome reshard.Outcome
}

// then reads txns next, and the live part from live.
func (p *planned) then(live *binlogdatapb.VGtid, txns ...*source.Txn) {
	p.srcs = append(p.srcs, &sliceSource{txns: txns})
	p.live = live
}

// resync continues the plan with a fresh snapshot, announced by a resync
// notice with fields.
func (p *planned) resync(def *streams.Definition, fields map[string]any) {
	live := StartPosition(&streams.Definition{Keyspace: def.Keyspace, Start: streams.StartSnapshot})
	notice := event.Control(event.TypeResync, def.Keyspace, "", fields)
	p.then(live, &source.Txn{VGtid: live, Events: []event.Event{notice}})
	p.outcome = reshard.Resync
}

// planStart places a reader from "now" at the tail's head, if there is a
// tail: no VStream of its own, not even to learn the position. Without
// one, the current position is read first, so that the first delivery
// carries it and a client that starts at "now" gets a cursor before any
// row.
func (h *Hub) planStart(ctx context.Context, def *streams.Definition, p *planned) error {
	head, err := h.tailHead(ctx, def)
	if err != nil {
		return &source.UpstreamError{Op: "current position of keyspace " + def.Keyspace, Err: err}
	}
	if head != nil {
		p.then(head, &source.Txn{VGtid: head})
		return nil
	}
	if cur, ok := h.src.(currentPositioner); ok {
		at, err := cur.Current(ctx, def.Keyspace)
		if err != nil {
			return err
		}
		p.then(at, &source.Txn{VGtid: at})
	}
	return nil
}

// planSpools reads a subscriber's bridge spools first, when it has any
// that continue its cursor (DESIGN §4 rule 3).
func (h *Hub) planSpools(ctx context.Context, def *streams.Definition, st *SubscriberState, pos *binlogdatapb.VGtid, p *planned) error {
	spools, after, err := h.planBridges(ctx, def, st, pos)
	if err != nil || after == nil {
		return err
	}
	p.srcs = append(p.srcs, spools...)
	p.live, p.outcome = after, reshard.Bridged
	return nil
}

// planMovedAway answers a position behind a MoveTables cutover whose
// source tables are dropped: it cannot be read up to it (DESIGN §4.1), a
// gap as for a reshard's deleted shards, unless the tail's ring still
// holds it. It reports whether the plan resyncs.
func (h *Hub) planMovedAway(ctx context.Context, def *streams.Definition, p *planned) (bool, error) {
	mv, missing, err := h.behindCompletedMove(ctx, def, p.live)
	if err != nil || mv == nil || h.ringCovers(def, p.live) {
		return false, err
	}
	d := reshard.Decision{Outcome: reshard.Resync, Missing: missing, From: p.live}
	if def.OnGap == streams.OnGapFail {
		h.observed(def, reshard.Failed, d)
		return false, &reshard.GapError{Missing: missing}
	}
	p.resync(def, map[string]any{
		"missing": missing,
		"reason":  ResyncTablesMoved,
		// The tables are a member of their own, not words of the
		// message: each reader gets those of its scope (auth/control.go).
		"tables": mv.Tables, "from": mv.From, "to": mv.To,
		"message": fmt.Sprintf("the cursor is behind the move of the tables listed from %s to %s, whose source tables are dropped; a fresh snapshot follows: discard what you derived from earlier events", mv.From, mv.To),
	})
	h.observed(def, reshard.Resync, d)
	return true, nil
}

// planRebuild continues a position on shards a reshard replaced (DESIGN
// §4 rule 4): exactly through the recorded journals, with a reshard
// notice for each, or by a resync. A position the tail's ring covers
// needs no rebuild, even if its shards are gone: the ring holds what
// followed it, across the reshard.
func (h *Hub) planRebuild(ctx context.Context, def *streams.Definition, p *planned) error {
	if h.rebuilder == nil || !position.Of(p.live).Concrete() || h.ringCovers(def, p.live) {
		return nil
	}
	d, err := h.decide(ctx, def, p.live)
	if err != nil {
		return err
	}
	switch d.Outcome {
	case reshard.Exact:
		var notes []*source.Txn
		for _, j := range d.Applied {
			notes = append(notes, &source.Txn{VGtid: d.VGtid, Events: []event.Event{reshardNotice(j)}})
		}
		p.then(d.VGtid, notes...)
		if p.outcome == reshard.Passthrough {
			p.outcome = reshard.Exact
		}
	case reshard.Resync:
		if def.OnGap == streams.OnGapFail {
			h.observed(def, reshard.Failed, d)
			return &reshard.GapError{Missing: d.Missing}
		}
		p.resync(def, map[string]any{
			"missing": d.Missing,
			"reason":  h.resyncReason(),
			"message": "the cursor needs shards that no longer exist and no recorded reshard continues it exactly; a fresh snapshot follows: discard what you derived from earlier events",
		})
	}
	h.observed(def, p.outcome, d)
	return nil
}

func (h *Hub) decide(ctx context.Context, def *streams.Definition, pos *binlogdatapb.VGtid) (reshard.Decision, error) {
	// The keyspace of the position: a cursor from before a MoveTables
	// cutover is on the keyspace the stream's tables left (DESIGN §4.1).
	ks := position.Of(pos).Keyspace(def.Keyspace)
	topo, err := h.rebuilder.Topology(ctx, ks)
	if err != nil {
		// Without a topology view, let vtgate judge the cursor: it fails
		// fast on a deleted shard and the client retries.
		h.log.Warn("topology unavailable; passing the cursor through", "stream", def.Name, "err", err)
		return reshard.Decision{Outcome: reshard.Passthrough, VGtid: pos}, nil
	}
	// The journals tell the incarnations of the cursor's shard names
	// apart (DESIGN §4 rule 6): a name serving now may be another shard
	// than the one the cursor was taken on.
	journals, err := h.rebuilder.Journals(ctx, ks)
	if err != nil {
		return reshard.Decision{}, fmt.Errorf("load reshard journals: %w", err)
	}
	return reshard.Decide(pos, topo, map[string][]*reshard.Journal{ks: journals}), nil
}

func (h *Hub) observed(def *streams.Definition, outcome reshard.Outcome, d reshard.Decision) {
	if outcome != reshard.Passthrough {
		var applied []string
		for _, j := range d.Applied {
			applied = append(applied, fmt.Sprintf("%v->%v", j.From(), j.To()))
		}
		h.log.Info("cursor rebuilt", "stream", def.Name, "outcome", outcome, "journals", applied, "missing", d.Missing,
			"cursor", position.Of(d.From).String())
	}
	if h.observe != nil {
		h.observe(def.Name, outcome)
	}
}

func reshardNotice(j *reshard.Journal) event.Event {
	return event.Control(event.TypeReshard, j.Keyspace, "", map[string]any{
		"from": j.From(), "to": j.To(), "journal_id": fmt.Sprint(j.ID),
	})
}

// planBridges finds where pos (the subscriber's acked position, or an
// explicit cursor) lies in the subscriber's bridge chain and returns the
// spools still to replay and the position after the last one. after is nil
// when no bridge applies: pos is past them all, or before them (an older
// cursor, which the spools cannot serve). Bridges are freed only when the
// acked position itself is past them. The chain begins with the freed
// bridges whose spools are still kept: another reader of the subscriber
// (a pull page on another replica) may present a cursor inside one.
func (h *Hub) planBridges(ctx context.Context, def *streams.Definition, st *SubscriberState, pos *binlogdatapb.VGtid) ([]txnSource, *binlogdatapb.VGtid, error) {
	var srcs []txnSource
	var after *binlogdatapb.VGtid
	started := false
	keep := 0
	at := position.Of(pos)
	acked := at.Identical(position.Of(st.VGtid))
	freed := h.sweepSpools(ctx, def, st)
	if acked {
		// The stored cursor is past every freed bridge: acks freed them
		// on their way, and acks only move on. Walked, they would be
		// judged by comparing the cursor with their starts, on shards
		// whose names a merge back reuses (a position on the new 0 is
		// no position on the old one, whatever its GTIDs say), and
		// replayed. They are for the subscriber's other readers, still
		// inside them.
		freed = nil
	}
	chain := append(freed, st.Bridges...)
	for i, b := range chain {
		from, err := position.Unmarshal(b.From)
		if err != nil {
			return nil, nil, err
		}
		to, err := position.Unmarshal(b.After)
		if err != nil {
			return nil, nil, err
		}
		switch {
		case started:
			srcs = append(srcs, &spoolSource{st: h.st, log: b.Log, want: b.Seq, events: b.Events})
			srcs = appendNotice(srcs, b, to)
		case at.Identical(from) || from.Compare(at) == position.Before:
			// At or after the bridge's start on its shards: resume after
			// the last spooled transaction pos has seen. pos need not be a
			// spool entry: transactions the filter dropped have positions
			// but no entries.
			seq, prev, err := h.spoolSeen(ctx, b.Log, pos)
			if err != nil {
				return nil, nil, err
			}
			if prev == nil {
				prev = from.VGtid()
			}
			sp := &spoolSource{st: h.st, log: b.Log, after: seq, want: b.Seq, events: b.Events, keyspace: def.Keyspace}
			if !at.Identical(position.Of(prev)) {
				sp.pos, sp.prev = pos, prev
			}
			started, keep = true, i-len(freed)
			srcs = append(srcs, sp)
			srcs = appendNotice(srcs, b, to)
		case at.Compare(from) == position.Before:
			return nil, nil, nil
		}
		after = to.VGtid()
	}
	if !started {
		// Past every spool (or at a bridge's After): free them once acked.
		if acked && len(st.Bridges) > 0 {
			h.freeBridges(ctx, def, st, len(st.Bridges))
		}
		return nil, nil, nil
	}
	if keep > 0 && acked {
		h.freeBridges(ctx, def, st, keep)
	}
	return srcs, after, nil
}

// appendNotice adds the bridge's control event, at the position after
// its spool: a reader bridged across a cutover learns of it as one online
// did, once (its cursor after the notice is past the spool).
func appendNotice(srcs []txnSource, b Bridge, after position.Position) []txnSource {
	if b.Notice == nil {
		return srcs
	}
	ev := event.Control(b.Notice.Type, b.Notice.Keyspace, "", b.Notice.Fields)
	return append(srcs, &sliceSource{txns: []*source.Txn{{VGtid: after.VGtid(), Events: []event.Event{ev}}}})
}

// spoolSeen returns the sequence number of the last entry of the spool's
// prefix that pos covers on every shard (0 if none) and the position after
// it: what a reader at pos has certainly received. Entries after it may
// still be held on some shards; the spool source sorts them out.
func (h *Hub) spoolSeen(ctx context.Context, log string, pos *binlogdatapb.VGtid) (uint64, *binlogdatapb.VGtid, error) {
	var after, seen uint64
	var at *binlogdatapb.VGtid
	for {
		entries, err := h.st.ReadLog(ctx, log, after, 1024)
		if err != nil {
			return 0, nil, err
		}
		for _, e := range entries {
			t, err := DecodeSpoolEntry(e.Value)
			if err != nil {
				return 0, nil, err
			}
			if !position.Of(pos).Covers(position.Of(t.VGtid)) {
				return seen, at, nil
			}
			after = e.Seq
			if t.Partial {
				// A piece of a chunked transaction (DESIGN §3.1) is at the
				// position before it, which pos covering says nothing
				// about the transaction: it is seen with its last piece.
				continue
			}
			seen, at = e.Seq, t.VGtid
		}
		if len(entries) < 1024 {
			return seen, at, nil
		}
	}
}

// freeBridges frees the first n bridges of a subscriber (acked past): they
// leave its chain at once, but their spools are kept for spoolGrace, as
// freed bridges, and deleted by a later plan (sweepSpools). The
// subscriber's cursor is past them, but another of its readers (a second
// tab, a pull page on another replica) may be replaying one, or present a
// cursor inside it: deleted now, it would lose the rest. A reader still
// on a spool after the grace finds it gone, which fails it
// (ErrSpoolGone): it resumes from the stored cursor, past the spool.
//
// st is the state the plan read: the bridges are moved in the state stored
// now (dropBridges).
func (h *Hub) freeBridges(ctx context.Context, def *streams.Definition, st *SubscriberState, n int) {
	if _, err := h.cursors.dropBridges(ctx, def.Name, st.Name, st.VGtid, st.Bridges[:n], time.Now().UTC()); err != nil {
		h.log.Warn("updating subscriber after freeing spools failed", "stream", def.Name, "subscriber", st.Name, "err", err)
	}
}

// sweepSpools deletes the spools of st's freed bridges whose grace has
// passed, then forgets those bridges, and returns the freed bridges whose
// spools are kept. A spool is deleted before its bridge is forgotten: a
// failure between leaves a bridge to delete again, never a spool nobody
// knows of.
func (h *Hub) sweepSpools(ctx context.Context, def *streams.Definition, st *SubscriberState) []Bridge {
	var kept []Bridge
	var gone []string
	for _, b := range st.Freed {
		if time.Since(b.FreedAt) < h.spoolGrace {
			kept = append(kept, b)
			continue
		}
		if err := h.st.DeleteLog(ctx, b.Log); err != nil {
			h.log.Warn("deleting a freed bridge spool failed", "log", b.Log, "err", err)
			kept = append(kept, b)
			continue
		}
		gone = append(gone, b.Log)
	}
	if len(gone) > 0 {
		if err := h.cursors.forgetFreed(ctx, def.Name, st.Name, gone); err != nil {
			h.log.Warn("updating subscriber after deleting freed spools failed", "stream", def.Name, "subscriber", st.Name, "err", err)
		}
	}
	return kept
}

// currentPositioner resolves "now" into real positions (source.Client).
type currentPositioner interface {
	Current(ctx context.Context, keyspace string) (*binlogdatapb.VGtid, error)
}
