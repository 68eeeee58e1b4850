package hub

import (
	"context"
	"errors"
	"slices"
	"time"

	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"

	"github.com/vstream-gateway/vstream-gateway/event"
	"github.com/vstream-gateway/vstream-gateway/position"
	"github.com/vstream-gateway/vstream-gateway/source"
	"github.com/vstream-gateway/vstream-gateway/streams"
)

// Following MoveTables (DESIGN §4.1). A stream's tables can move to
// another keyspace. vtgate tells a VStream on the source nothing: after
// SwitchTraffic it delivers the reverse workflow's copies of the rows
// written on the target, and after `complete` nothing at all. So every
// VStream a stream reads goes through a movingSource: it reads the
// keyspace of its position, and when a recorded move applies (the
// stream's definition lists it) it reads the source until every
// participant shard reached the journal's local position, drops what
// follows there (the copies), announces `moved` once and continues on the
// target keyspace from the journal's positions.

// Mover is what the hub needs to follow MoveTables cutovers; the server
// builds it from reshard.Mover and the stream registry.
type Mover interface {
	// Pending reports whether a MoveTables workflow involves one of
	// tables of keyspace.
	Pending(keyspace string, tables []string) bool
	// Sync returns once a journal read of keyspace that began at or after
	// `after` is done and any cutover it found is recorded in the streams'
	// definitions.
	Sync(ctx context.Context, keyspace string, after time.Time) error
	// Moves returns the moves the stream has followed (stored, not cached).
	Moves(ctx context.Context, stream string) ([]streams.Move, error)
}

// WithMover makes readers follow MoveTables cutovers.
func WithMover(m Mover) Option { return func(h *Hub) { h.mover = m } }

// movingSource reads a stream from a position, across MoveTables cutovers.
type movingSource struct {
	h     *Hub
	def   *streams.Definition
	pos   *binlogdatapb.VGtid
	ks    string              // keyspace being read
	entry *binlogdatapb.VGtid // where reading ks began (nil until concrete)
	r     *source.Reader
	cut   *streams.Move // the move being crossed
	out   []*source.Txn // notices to deliver first
	ctx   context.Context
	opts  []source.ReadOption // for the first VStream only (resuming inside a transaction)
}

// openStream returns the VStream of def from pos: a movingSource when the
// hub follows moves, else a plain reader. opts apply to the VStream opened
// at pos, not to the target keyspace's after a move.
func (h *Hub) openStream(ctx context.Context, def *streams.Definition, pos *binlogdatapb.VGtid, opts ...source.ReadOption) txnSource {
	ks := keyspaceOf(pos, def.Keyspace)
	if h.mover == nil {
		return h.src.Open(ctx, h.spec(def, ks), pos, opts...)
	}
	m := &movingSource{h: h, def: def, pos: pos, ks: ks, ctx: ctx, opts: opts}
	if joinable(pos) {
		m.entry = pos
	}
	return m
}

func (h *Hub) spec(def *streams.Definition, keyspace string) source.Spec {
	return source.Spec{Name: def.Name, Keyspace: keyspace, Rules: def.VitessRules()}
}

// keyspaceOf is the keyspace a position is on (a stream reads one at a
// time), or def when it names none.
func keyspaceOf(pos *binlogdatapb.VGtid, def string) string {
	for _, sg := range pos.GetShardGtids() {
		if sg.Keyspace != "" {
			return sg.Keyspace
		}
	}
	return def
}

// moveLocal is the position the source shards of m stopped at.
func moveLocal(m *streams.Move) position.Position {
	var shards []position.Shard
	for s, g := range m.Local {
		shards = append(shards, position.Shard{Keyspace: m.From, Shard: s, GTID: g})
	}
	return position.New(shards...)
}

// moveApply continues pos on m's target: the source shards give way to the
// target shards at the journal's positions.
func moveApply(pos *binlogdatapb.VGtid, m *streams.Move) *binlogdatapb.VGtid {
	var old []string
	for s := range m.Local {
		old = append(old, s)
	}
	var targets []position.Shard
	names := mapKeys(m.Targets)
	slices.Sort(names)
	for _, s := range names {
		targets = append(targets, position.Shard{Keyspace: m.To, Shard: s, GTID: m.Targets[s]})
	}
	p := position.Of(pos).Replace(m.From, old, targets...)
	// Shards of the source the journal does not name have nothing more
	// for these tables either.
	return p.Replace(m.From, shardNames(p.InKeyspace(m.From))).VGtid()
}

func mapKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func shardNames(p position.Position) []string {
	var out []string
	for _, s := range p.Shards() {
		out = append(out, s.Shard)
	}
	return out
}

// applicable finds the move out of ks that a reader entering ks at entry
// still has to cross: the first recorded one whose cutover is at or after
// entry on every source shard.
func (m *movingSource) applicable(ctx context.Context) (*streams.Move, error) {
	if m.entry == nil {
		return nil, nil
	}
	moves, err := m.h.mover.Moves(ctx, m.def.Name)
	if err != nil {
		return nil, err
	}
	at := position.Of(m.entry).InKeyspace(m.ks)
	for i := range moves {
		mv := &moves[i]
		if mv.From == m.ks && moveLocal(mv).Covers(at) {
			return mv, nil
		}
	}
	return nil, nil
}

func (m *movingSource) open() {
	if m.r == nil {
		m.r = m.h.src.Open(m.ctx, m.h.spec(m.def, m.ks), m.pos, m.opts...)
		m.opts = nil
	}
}

// crossed reports whether the reader has reached the cutover on every
// source shard.
func (m *movingSource) crossed() bool {
	return m.cut != nil && position.Of(m.pos).Covers(moveLocal(m.cut))
}

// finish ends the source half: the notice, then the target keyspace.
func (m *movingSource) finish() {
	mv := m.cut
	if m.r != nil {
		m.r.Close()
		m.r = nil
	}
	m.pos = moveApply(m.pos, mv)
	// ResumeInTxn (opts) counts events of a transaction of the source
	// keyspace: never for the target's first VStream.
	m.ks, m.entry, m.cut, m.opts = mv.To, m.pos, nil, nil
	notice := source.Control(event.TypeMoved, mv.From, "", map[string]any{
		"tables": mv.Tables, "from": mv.From, "to": mv.To, "journal": mv.Journal,
	})
	m.out = append(m.out, &source.Txn{VGtid: m.pos, Events: []event.Event{notice}, Received: time.Now()})
	m.h.log.Info("stream followed its tables to another keyspace", "stream", m.def.Name, "from", mv.From, "to", mv.To,
		"tables", mv.Tables, "position", m.pos.String())
}

// sync waits for a journal read begun after t, retrying while vtctld
// fails: delivering first could hand out a reverse copy as a new row.
func (m *movingSource) sync(ctx context.Context, t time.Time) error {
	wait := 100 * time.Millisecond
	for {
		err := m.h.mover.Sync(ctx, m.ks, t)
		if err == nil || ctx.Err() != nil {
			return err
		}
		m.h.log.Warn("MoveTables journal read failed; holding the stream until it succeeds", "stream", m.def.Name, "keyspace", m.ks, "err", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, 5*time.Second)
	}
}

func (m *movingSource) Next(ctx context.Context) (*source.Txn, error) {
	return m.next(ctx, true)
}

func (m *movingSource) TryNext() (*source.Txn, bool, error) {
	t, err := m.next(context.Background(), false)
	if errors.Is(err, errNothingBuffered) {
		return nil, false, nil
	}
	return t, err == nil, err
}

var errNothingBuffered = errors.New("hub: nothing buffered")

func (m *movingSource) next(ctx context.Context, block bool) (*source.Txn, error) {
	for {
		if len(m.out) > 0 {
			t := m.out[0]
			m.out = m.out[1:]
			return t, nil
		}
		if m.cut == nil && m.r == nil {
			mv, err := m.applicable(ctx)
			if err != nil {
				return nil, err
			}
			m.cut = mv
		}
		if m.crossed() {
			m.finish()
			continue
		}
		m.open()
		var txn *source.Txn
		if block {
			t, err := m.r.Next(ctx)
			if err != nil {
				return nil, err
			}
			txn = t
		} else {
			t, ok, err := m.r.TryNext()
			if err != nil {
				return nil, err
			}
			if !ok {
				return nil, errNothingBuffered
			}
			txn = t
		}
		if txn.Heartbeat {
			return txn, nil
		}
		if m.entry == nil {
			if joinable(txn.VGtid) {
				m.entry = txn.VGtid
			}
		} else if m.cut == nil && m.h.mover.Pending(m.ks, m.def.TableNames()) {
			// A workflow moves these tables: this transaction may come
			// after the cutover. Only a journal read that began after it
			// arrived can tell.
			sctx := ctx
			if !block {
				sctx = m.ctx
			}
			if err := m.sync(sctx, txn.Received); err != nil {
				return nil, err
			}
			mv, err := m.applicable(sctx)
			if err != nil {
				return nil, err
			}
			m.cut = mv
		}
		if m.cut != nil && m.pastCut(txn) {
			// A reverse copy (or the journal's own transaction): the
			// target keyspace delivers the original.
			continue
		}
		m.pos = txn.VGtid
		return txn, nil
	}
}

// pastCut reports whether every source shard txn moves is already at or
// past the cutover.
func (m *movingSource) pastCut(txn *source.Txn) bool {
	moved := movedShards(m.pos, txn.VGtid)
	if len(moved) == 0 && txn.Partial && len(txn.Events) > 0 {
		// A piece of a chunked transaction (DESIGN §3.1) is at the
		// position before it: its shard is the one its events are on
		// (a transaction is one shard's). Its pieces are dropped like
		// its last one, which moves that shard.
		moved = []string{txn.Events[0].Shard}
	}
	if len(moved) == 0 {
		return false
	}
	local, cur := moveLocal(m.cut), position.Of(m.pos)
	for _, s := range moved {
		l, ok := local.Lookup(m.ks, s)
		if !ok {
			return false
		}
		if c, ok := cur.Lookup(m.ks, s); !ok || !c.Covers(l) {
			return false
		}
	}
	return true
}

func (m *movingSource) Buffered() int {
	n := len(m.out)
	if m.r != nil {
		n += m.r.Buffered()
	}
	return n
}

func (m *movingSource) Close() {
	if m.r != nil {
		m.r.Close()
		m.r = nil
	}
}
