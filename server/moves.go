package server

import (
	"context"
	"time"

	"github.com/vstream-gateway/vstream-gateway/metrics"
	"github.com/vstream-gateway/vstream-gateway/reshard"
	"github.com/vstream-gateway/vstream-gateway/streams"
)

// Following MoveTables (DESIGN §4.1): with --vtctld, a reshard.Mover finds
// the cutovers and moves the stream definitions whose tables they carry;
// the hub's readers follow the definitions.

// moveWatch adapts the reshard.Mover and the stream registry to hub.MoveWatch.
type moveWatch struct {
	m   *reshard.Mover
	reg *streams.Registry
}

func (h moveWatch) Pending(keyspace string, tables []string) bool {
	return h.m.Pending(keyspace, tables)
}

func (h moveWatch) Fresh(ctx context.Context, after time.Time) error {
	return h.m.Fresh(ctx, after)
}

func (h moveWatch) Sync(ctx context.Context, keyspace string, after time.Time) error {
	return h.m.Sync(ctx, keyspace, after)
}

func (h moveWatch) Blocked(ctx context.Context, stream string) (*streams.Block, error) {
	d, err := h.reg.Fresh(ctx, stream)
	if err != nil {
		return nil, err
	}
	return d.Blocked, nil
}

func (h moveWatch) Completed(ctx context.Context, keyspace string, tables []string) (bool, error) {
	return h.m.Completed(ctx, keyspace, tables)
}

func (h moveWatch) Moves(ctx context.Context, stream string) ([]streams.Move, error) {
	d, err := h.reg.Fresh(ctx, stream)
	if err != nil {
		return nil, err
	}
	return d.Moves, nil
}

// newMover builds the MoveTables watch over vtctld at addr.
func (s *Server) newMover(addr string) (*reshard.Mover, *reshard.Vtctld, error) {
	vt, err := reshard.DialVtctld(addr)
	if err != nil {
		return nil, nil, err
	}
	m := reshard.NewMover(vt, s.journals, s.store, servedKeyspaces(s.streams), s.onMove, reshard.WithMoverLogger(s.log))
	return m, vt, nil
}

// onMove moves every stream that reads j's keyspace and whose tables all
// moved. A stream defined after the cutover was seen is left alone (its
// keyspace had the tables again by then); one that reads only some of the
// moved tables, or matches tables by /regex/, cannot follow: said out loud.
func (s *Server) onMove(ctx context.Context, j *reshard.Journal) error {
	defs, err := s.streams.List(ctx)
	if err != nil {
		return err
	}
	for _, d := range defs {
		if d.Moved().After(j.SeenAt) {
			continue
		}
		follows, partial := d.Follows(j.Keyspace, j.Tables)
		if partial {
			if err := s.blockPartial(ctx, d, j); err != nil {
				return err
			}
			continue
		}
		if !follows {
			continue
		}
		// Positions of the shards' incarnations (DESIGN §4 rule 6): a
		// move out of the first "0" is not one out of the second.
		mv := streams.Move{Journal: j.Key, From: j.Keyspace, To: j.TargetKeyspace, Tables: j.Tables,
			Local: j.StampedLocal(), Targets: j.StampedTargets(), At: time.Now().UTC()}
		if _, err := s.streams.Move(ctx, d.Name, mv); err != nil {
			return err
		}
		s.log.Info("stream follows its tables to another keyspace", "stream", d.Name, "from", j.Keyspace, "to", j.TargetKeyspace,
			"tables", j.Tables, "journal", j.Key)
	}
	// Named subscribers (and webhooks) behind the cutover are bridged
	// while the source tables exist: `complete` drops them, perhaps a
	// second after the switch.
	if defs, err = s.streams.List(ctx); err != nil {
		return err
	}
	s.bridger.Moved(defs, j)
	return nil
}

// blockPartial records that MoveTables moved only some of d's tables: d
// cannot follow them (one stream reads one keyspace) and keeps reading its
// keyspace. Said to everyone, not only in the log: the definition shows
// `blocked`, its readers get a `blocked` event once, and a metric counts it.
func (s *Server) blockPartial(ctx context.Context, d *streams.Definition, j *reshard.Journal) error {
	moved := d.MovedTables(j.Tables)
	b := streams.Block{Reason: streams.BlockPartialMove, Journal: j.Key, From: j.Keyspace, To: j.TargetKeyspace,
		Tables: moved, Local: j.StampedLocal(), At: time.Now().UTC()}
	_, fresh, err := s.streams.Block(ctx, d.Name, b)
	if err != nil || !fresh {
		return err
	}
	metrics.StreamPartialMove(d.Name)
	s.log.Error("MoveTables moved only some of a stream's tables; the stream cannot follow them and reads its keyspace as before",
		"stream", d.Name, "keyspace", j.Keyspace, "moved", moved, "to", j.TargetKeyspace, "stream_tables", d.TableNames(), "journal", j.Key)
	return nil
}
