package hub

import (
	"context"
	"fmt"

	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"

	"github.com/vstream-gateway/vstream-gateway/position"
	"github.com/vstream-gateway/vstream-gateway/reshard"
	"github.com/vstream-gateway/vstream-gateway/streams"
	"github.com/vstream-gateway/vstream-gateway/upstream"
)

// ResyncTablesMoved: the cursor is behind a MoveTables cutover whose
// workflow is completed; the events between it and the cutover were in
// the dropped source tables (DESIGN §4.1).
const ResyncTablesMoved = "tables_moved"

// behindCompletedMove finds the recorded move out of pos's keyspace that
// pos is behind on some source shard, when its workflow is completed:
// nothing can read the source up to the cutover any more. missing names
// the source shards pos is behind on ("keyspace/shard").
func (h *Hub) behindCompletedMove(ctx context.Context, def *streams.Definition, pos *binlogdatapb.VGtid) (mv *streams.Move, missing []string, err error) {
	if h.moves == nil || !position.Of(pos).Concrete() {
		return nil, nil, nil
	}
	ks := position.Of(pos).Keyspace(def.Keyspace)
	moves, err := h.moves.Moves(ctx, def.Name)
	if err != nil {
		return nil, nil, fmt.Errorf("load the stream's moves: %w", err)
	}
	at := position.Of(pos)
	var journals []*reshard.Journal // loaded when shards differ
	load := func() ([]*reshard.Journal, error) {
		if journals == nil && h.rebuilder != nil {
			if journals, err = h.rebuilder.Journals(ctx, ks); err != nil {
				return nil, fmt.Errorf("load reshard journals: %w", err)
			}
		}
		return journals, nil
	}
	for i := range moves {
		m := &moves[i]
		if m.From != ks {
			continue
		}
		local := upstream.Cutover(m)
		if after, err := onShardsAfter(at, ks, local, m.Journal, load); err != nil {
			return nil, nil, err
		} else if after {
			continue // taken on shards a reshard made after this cutover
		}
		missing = nil
		for _, l := range local.Shards() {
			c, ok := at.Lookup(ks, l.Shard)
			if ok && c.Incarnation != l.Incarnation && h.rebuilder != nil {
				// The move was out of another shard of the name (DESIGN
				// §4 rule 6): one before the cursor's is behind it.
				list, err := load()
				if err != nil {
					return nil, nil, err
				}
				if reshard.Older(list, l.Incarnation, c.Incarnation) {
					continue
				}
			}
			if !ok || !c.Covers(l) {
				missing = append(missing, ks+"/"+l.Shard)
			}
		}
		if len(missing) == 0 {
			continue // at or past this cutover: movingSource crosses it at once
		}
		done, err := h.moves.Completed(ctx, ks, m.Tables)
		if err != nil {
			return nil, nil, fmt.Errorf("is the MoveTables workflow completed: %w", err)
		}
		if !done {
			return nil, nil, nil // the source still has the tables: read up to the cutover
		}
		return m, missing, nil
	}
	return nil, nil, nil
}

// onShardsAfter reports whether pos holds a shard of ks that the move
// (its source positions local, its journal key) was not recorded on and
// that a reshard recorded after the move created: pos was taken after
// the cutover. (0 → -80,80- after a move out of 0: the cursor lacks 0
// and is not behind the move.) Shards the move was recorded on are
// judged by position; journals are loaded only when pos holds others.
func onShardsAfter(pos position.Position, ks string, local position.Position, key string, load func() ([]*reshard.Journal, error)) (bool, error) {
	for _, c := range pos.Shards() {
		if c.Keyspace != ks || c.Shard == "" {
			continue
		}
		if l, ok := local.Lookup(ks, c.Shard); ok && l.Incarnation == c.Incarnation {
			continue
		}
		list, err := load()
		if err != nil || list == nil {
			return false, err
		}
		if reshard.CreatedAfter(list, key, c.Shard, c.Incarnation) {
			return true, nil
		}
	}
	return false, nil
}
