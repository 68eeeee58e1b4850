package upstream

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

// movingSource reads a stream from a position, across MoveTables cutovers.
type movingSource struct {
	u     *Upstream
	def   *streams.Definition
	pos   *binlogdatapb.VGtid
	ks    string              // keyspace being read
	entry *binlogdatapb.VGtid // where reading ks began (nil until concrete)
	r     *source.Reader
	cut   *streams.Move // the move being crossed
	out   []*source.Txn // notices to deliver first
	// looked: the moves out of ks were looked up since entering it.
	looked bool
	// held is a transaction of the source read while a workflow moves the
	// stream's tables: it is released (or dropped as a copy) when look,
	// the journal read begun after it arrived, is done.
	held *source.Txn
	look *lookup
	// trace is when the first transaction without rows since the last
	// look-up arrived: perhaps a switch's journal (vtgate drops a TABLES
	// JOURNAL but passes its transaction on, empty), after which the next
	// transaction with rows may be a reverse copy.
	trace  time.Time
	ctx    context.Context // the readers' context, cancelled by Close
	cancel context.CancelFunc
	opts   []source.ReadOption // for the first VStream only (resuming inside a transaction)
	// block is a partial move ahead of the reader; blockSaid the journal
	// of the last one announced (moveblock.go).
	block     *streams.Block
	blockSaid string
}

// lookup is a look-up of the move to cross, in the background: TryNext
// must never wait for vtctld or the store.
type lookup struct {
	done  chan struct{}
	mv    *streams.Move
	block *streams.Block
	err   error
}

// Cutover is the position the source shards of m stopped at: where a
// reader of the source crosses the move.
func Cutover(m *streams.Move) position.Position {
	var shards []position.Shard
	for s, g := range m.Local {
		shards = append(shards, position.Entry(m.From, s, g))
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
		targets = append(targets, position.Entry(m.To, s, m.Targets[s]))
	}
	p := position.Of(pos).Replace(m.From, old, targets...)
	// Shards of the source the journal does not name have nothing more
	// for these tables either.
	return p.Replace(m.From, p.InKeyspace(m.From).ShardNames()).VGtid()
}

func mapKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// applicable finds the move out of ks that a reader entering ks at entry
// still has to cross: the first recorded one whose cutover is at or after
// entry on every source shard.
func (m *movingSource) applicable(ctx context.Context, ks string, entry *binlogdatapb.VGtid) (*streams.Move, error) {
	if entry == nil {
		return nil, nil
	}
	moves, err := m.u.moves.Moves(ctx, m.def.Name)
	if err != nil {
		return nil, err
	}
	at := position.Of(entry).InKeyspace(ks)
	for i := range moves {
		mv := &moves[i]
		if mv.From == ks && Cutover(mv).Covers(at) {
			return mv, nil
		}
	}
	return nil, nil
}

// startLookup looks up the move to cross in the background; with gate,
// only after a journal read that began at or after `after` is done. With
// rulesAfter set, the journal read is needed only if a routing-rules read
// begun at or after rulesAfter names the stream's tables.
func (m *movingSource) startLookup(gate bool, after, rulesAfter time.Time) {
	l := &lookup{done: make(chan struct{})}
	m.look = l
	ks, entry := m.ks, m.entry
	go func() {
		defer close(l.done)
		if gate && !rulesAfter.IsZero() {
			if err := m.u.moves.Fresh(m.ctx, rulesAfter); err != nil {
				if m.ctx.Err() != nil {
					l.err = m.ctx.Err()
					return
				}
				// vtctld does not answer: the rules last polled decide, as
				// they do for every transaction without a trace.
				m.u.log.Warn("MoveTables: reading routing rules after a possible switch failed; using the last ones read",
					"stream", m.def.Name, "keyspace", ks, "err", err)
			}
			gate = m.u.moves.Pending(ks, m.def.TableNames())
		}
		if gate {
			if l.err = m.sync(m.ctx, ks, after); l.err != nil {
				return
			}
		}
		if l.mv, l.err = m.applicable(m.ctx, ks, entry); l.err != nil {
			return
		}
		l.block, l.err = m.applicableBlock(m.ctx, ks, entry)
	}()
}

// awaitLookup waits for the look-up in progress (not at all unless
// block) and takes its answer; errNothingBuffered when it is not done.
func (m *movingSource) awaitLookup(ctx context.Context, block bool) (*streams.Move, error) {
	l := m.look
	if block {
		select {
		case <-l.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	} else {
		select {
		case <-l.done:
		default:
			return nil, errNothingBuffered
		}
	}
	m.look = nil
	if l.err == nil && l.block != nil {
		m.block = l.block
	}
	return l.mv, l.err
}

func (m *movingSource) open() {
	if m.r == nil {
		m.r = m.u.src.Open(m.ctx, spec(m.def, m.ks), m.pos, m.opts...)
		m.opts = nil
	}
}

// crossed reports whether the reader has reached the cutover on every
// source shard.
func (m *movingSource) crossed() bool {
	return m.cut != nil && position.Of(m.pos).Covers(Cutover(m.cut))
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
	m.ks, m.entry, m.cut, m.looked, m.opts = mv.To, m.pos, nil, false, nil
	notice := event.Control(event.TypeMoved, mv.From, "", map[string]any{
		"tables": mv.Tables, "from": mv.From, "to": mv.To, "journal": mv.Journal,
	})
	m.out = append(m.out, &source.Txn{VGtid: m.pos, Events: []event.Event{notice}, Received: time.Now()})
	m.u.log.Info("stream followed its tables to another keyspace", "stream", m.def.Name, "from", mv.From, "to", mv.To,
		"tables", mv.Tables, "position", m.pos.String())
}

// sync waits for a journal read of ks begun after t, retrying while
// vtctld fails: delivering first could hand out a reverse copy as a new
// row.
func (m *movingSource) sync(ctx context.Context, ks string, t time.Time) error {
	wait := 100 * time.Millisecond
	for {
		err := m.u.moves.Sync(ctx, ks, t)
		if err == nil || ctx.Err() != nil {
			return err
		}
		m.u.log.Warn("MoveTables journal read failed; holding the stream until it succeeds", "stream", m.def.Name, "keyspace", ks, "err", err)
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

// TryNext never waits: a transaction held for a journal read, or a
// look-up in progress, is "nothing yet".
func (m *movingSource) TryNext() (*source.Txn, bool, error) {
	t, err := m.next(context.Background(), false)
	if errors.Is(err, errNothingBuffered) {
		return nil, false, nil
	}
	return t, err == nil, err
}

var errNothingBuffered = errors.New("upstream: nothing buffered")

func (m *movingSource) next(ctx context.Context, block bool) (*source.Txn, error) {
	for {
		if len(m.out) > 0 {
			t := m.out[0]
			m.out = m.out[1:]
			return t, nil
		}
		if m.look == nil && !m.looked && m.entry != nil {
			// Entering a keyspace: is there a recorded move out of it
			// still ahead of the reader?
			m.startLookup(false, time.Time{}, time.Time{})
		}
		if m.look != nil {
			mv, err := m.awaitLookup(ctx, block)
			if err != nil {
				return nil, err
			}
			m.cut, m.looked = mv, true
		}
		if txn := m.held; txn != nil {
			m.held = nil
			if m.deliver(txn) {
				return txn, nil
			}
			continue
		}
		if m.crossed() {
			m.finish()
			continue
		}
		txn, err := m.read(ctx, block)
		if err != nil {
			return nil, err
		}
		if txn.Heartbeat {
			return txn, nil
		}
		m.reshardOf(txn)
		if !m.hold(txn) && m.deliver(txn) {
			return txn, nil
		}
	}
}

// read is the next transaction of the keyspace being read: waiting for
// it when block, else errNothingBuffered when none is ready.
func (m *movingSource) read(ctx context.Context, block bool) (*source.Txn, error) {
	m.open()
	if block {
		return m.r.Next(ctx)
	}
	t, ok, err := m.r.TryNext()
	if err == nil && !ok {
		err = errNothingBuffered
	}
	return t, err
}

// reshardOf notes a reshard of ks: reading its new shards begins at the
// journal's target positions. A move out of ks now is one of those
// shards' (another incarnation's, when a merge back reuses a name):
// judged against where the reader entered the old ones it would never
// apply.
func (m *movingSource) reshardOf(txn *source.Txn) {
	if j := txn.Journal; j != nil && txn.JournalDone && m.entry != nil && j.MigrationType == binlogdatapb.MigrationType_SHARDS {
		m.entry, m.looked = position.Of(txn.VGtid).ApplyJournal(j).VGtid(), false
	}
}

// hold keeps txn back, reporting whether it did, when it may come after
// a MoveTables cutover that only a journal read begun after it arrived
// can tell; it also notes where reading the keyspace began.
func (m *movingSource) hold(txn *source.Txn) bool {
	switch {
	case m.entry == nil:
		if replicating(txn.VGtid) {
			m.entry = txn.VGtid
			m.looked = true // a reader from the live end has no move ahead yet
		}
	case m.cut == nil && m.u.moves.Pending(m.ks, m.def.TableNames()):
		// A workflow moves these tables: this transaction may come after
		// the cutover.
		m.held = txn
		m.startLookup(true, txn.Received, time.Time{})
		m.trace = time.Time{}
		return true
	case m.cut == nil && len(txn.Events) > 0 && !m.trace.IsZero():
		// Rows after a possible switch the rules polled so far do not
		// show (a workflow created and switched within one poll):
		// routing rules read after the trace decide whether to hold the
		// transaction for a journal read.
		m.held = txn
		m.startLookup(true, txn.Received, m.trace)
		m.trace = time.Time{}
		return true
	}
	if m.cut == nil && len(txn.Events) == 0 && m.trace.IsZero() && m.entry != nil {
		m.trace = txn.Received
	}
	return false
}

// deliver moves the reader to txn, reporting whether txn is the
// reader's: one past the cutover of the move being crossed (a reverse
// copy, or the journal's own transaction) is not, since the target
// keyspace delivers the original.
func (m *movingSource) deliver(txn *source.Txn) bool {
	if m.cut != nil && m.pastCut(txn) {
		return false
	}
	m.pos = txn.VGtid
	m.announceBlock()
	return true
}

// pastCut reports whether every source shard txn moves is already at or
// past the cutover.
func (m *movingSource) pastCut(txn *source.Txn) bool {
	return PastCutover(m.pos, txn, m.ks, Cutover(m.cut))
}

// PastCutover reports whether txn, read at cur, moves only shards of keyspace
// ks that cur already has at or past their cutover positions in local: on
// a MoveTables source, a reverse copy (or the journal's own transaction).
func PastCutover(cur *binlogdatapb.VGtid, txn *source.Txn, ks string, local position.Position) bool {
	moved := position.Of(cur).Moved(position.Of(txn.VGtid))
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
	at := position.Of(cur)
	for _, s := range moved {
		l, ok := local.Lookup(ks, s)
		if !ok {
			return false
		}
		if c, ok := at.Lookup(ks, s); !ok || !c.Covers(l) {
			return false
		}
	}
	return true
}

func (m *movingSource) Buffered() int {
	n := len(m.out)
	if m.held != nil {
		n++
	}
	if m.r != nil {
		n += m.r.Buffered()
	}
	return n
}

func (m *movingSource) Close() {
	m.cancel()
	if m.r != nil {
		m.r.Close()
		m.r = nil
	}
}
