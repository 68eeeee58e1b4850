package hub

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"

	"github.com/vstream-gateway/vstream-gateway/metrics"
	"github.com/vstream-gateway/vstream-gateway/position"
	"github.com/vstream-gateway/vstream-gateway/source"
	"github.com/vstream-gateway/vstream-gateway/streams"
	"github.com/vstream-gateway/vstream-gateway/upstream"
)

// followSource is the live part of every subscription: it reads the stream
// from the reader's position, on the stream's tail when the tail's ring
// covers that position, otherwise on a VStream of its own (catch-up) that it
// leaves for the tail as soon as the ring covers the position it reached.
//
// Joining is decided per shard (DESIGN §5.3): from the ring entry it joins
// at, the reader gets on each shard exactly the transactions its own
// position on that shard does not hold, in the tail's order, and its
// position after each is its own with that shard advanced. A reader that
// falls out of the ring (slower than the ring is long), or whose tail
// stops, goes on privately from where it is; it never slows the tail —
// unless the stream itself ended (streamEnded): then so does the reader.
type followSource struct {
	h   *Hub
	def *streams.Definition
	pos *binlogdatapb.VGtid

	t       *tail // held from creation to Close
	ring    *ring // set while following the tail
	seq     uint64
	aligned bool      // pos equals the tail's position before entry seq
	tok     string    // token of the last delivery, when it is the tail's
	shared  *Delivery // the tail's delivery of the last transaction, when it is the reader's

	private txnSource // the catch-up VStream, while there is one
	closed  sync.Once
	// sinceJoinCheck counts catch-up deliveries since the last attempt to
	// join: a reader far behind does not try after every transaction.
	sinceJoinCheck int
	lastJoinCheck  time.Time
	// open counts the events of a chunked transaction delivered so far
	// (DESIGN §3.1): the reader is inside it, cannot change sources at
	// will, and a private VStream taking over skips that many.
	open int
	// rider: a journal watcher riding the tail (ride.go). It is not one
	// of the tail's users, and it never reads privately: off the tail,
	// its ride ends.
	rider bool
}

// A catch-up tries to join the tail every joinCheckEvery transactions, and
// whenever it has nothing buffered (it reads as fast as vtgate sends: it
// may be at the live end) but at most every joinCheckIdle: a replay of
// small transactions would otherwise compare positions after each.
const (
	joinCheckEvery = 256
	joinCheckIdle  = 50 * time.Millisecond
)

func (h *Hub) follow(def *streams.Definition, pos *binlogdatapb.VGtid) *followSource {
	return &followSource{
		h: h, def: def, pos: pos,
		t: h.acquireTail(def),
	}
}

// joinable reports whether the position can be served by a tail at all:
// a copy phase reads privately until it is done.
func joinable(pos *binlogdatapb.VGtid) bool {
	p := position.Of(pos)
	return p.Concrete() && !p.Copying()
}

// tryJoin moves the reader onto the tail if its ring covers pos.
func (f *followSource) tryJoin() bool {
	if f.t == nil || f.open > 0 || !joinable(f.pos) {
		return false
	}
	r := f.t.current()
	if r == nil {
		return false
	}
	seq, ok := r.joinAt(f.pos)
	if !ok {
		return false
	}
	before := r.before(seq)
	aligned := before != nil && position.Of(f.pos).Identical(position.Of(before))
	if !aligned {
		// Joining at a chunked transaction out of step would only leave
		// again at once (unaligned): stay on the VStream past it.
		if e, _ := r.get(context.Background(), seq, false); e != nil && e.txn.Partial && !e.txn.Continued {
			return false
		}
	}
	switch {
	case f.rider:
	case f.private != nil:
		f.private.Close()
		f.private = nil
		metrics.TailJoins(f.def.Name, "caught_up")
	default:
		metrics.TailJoins(f.def.Name, "direct")
	}
	f.ring, f.seq, f.aligned = r, seq, aligned
	return true
}

// leave continues privately after the tail could not serve the reader.
func (f *followSource) leave(err error) {
	reason := "tail_stopped"
	switch {
	case errors.Is(err, errChunkUnaligned):
		reason = "chunked_txn"
	case errors.Is(err, errFellOff):
		reason = "fell_behind"
		f.h.log.Info("reader fell behind the stream tail's history; continuing on a VStream of its own", "stream", f.def.Name, "inside_txn_events", f.open)
	}
	metrics.TailLeaves(f.def.Name, reason)
	f.ring = nil
	f.aligned = false
}

func (f *followSource) Next(ctx context.Context) (*source.Txn, error) {
	for {
		if f.ring != nil {
			e, err := f.ring.get(ctx, f.seq, true)
			if err != nil {
				if ctx.Err() != nil {
					return nil, ctx.Err()
				}
				if streamEnded(err) {
					return nil, err
				}
				if f.rider {
					return nil, fmt.Errorf("%w: %w", ErrRideEnded, err)
				}
				f.leave(err)
				continue
			}
			if f.unaligned(e) {
				if f.rider {
					return nil, fmt.Errorf("%w: %w", ErrRideEnded, errChunkUnaligned)
				}
				f.leave(errChunkUnaligned)
				continue
			}
			f.seq++
			if txn, ok := f.take(e); ok {
				return f.count(txn), nil
			}
			continue
		}
		if f.private == nil {
			// A tail still starting is not waited for: it starts at the
			// live end, where a reader with a cursor is rarely exactly.
			if f.tryJoin() {
				continue
			}
			f.openPrivate()
		} else if f.sinceJoinCheck >= joinCheckEvery || f.private.Buffered() == 0 && time.Since(f.lastJoinCheck) >= joinCheckIdle {
			f.sinceJoinCheck, f.lastJoinCheck = 0, time.Now()
			if f.tryJoin() {
				continue
			}
		}
		txn, err := f.nextPrivate(ctx)
		if errors.Is(err, errJoinCheckDue) {
			continue
		}
		if err != nil {
			return nil, err
		}
		f.sinceJoinCheck++
		f.tok, f.shared = "", nil
		if !txn.Heartbeat {
			f.pos = txn.VGtid
		}
		return f.count(txn), nil
	}
}

// streamEnded reports whether the tail's ring closed because the stream
// itself ended (its tables dropped, on_gap fail): a follower ends with the
// same error instead of reading on privately from past the end.
func streamEnded(err error) bool {
	var dropped *upstream.TablesDroppedError
	return errors.As(err, &dropped)
}

// errChunkUnaligned: the tail's next entry starts a chunked transaction
// and the reader's position is not the tail's (DESIGN §5.3). Whether the
// reader has that transaction is decided by the position after it, which
// comes with its last piece: the reader reads on privately instead, from
// its own position, where vtgate sends it exactly what it lacks.
var errChunkUnaligned = errors.New("hub: a chunked transaction on the tail, reader not in step")

// unaligned reports whether e starts a chunked transaction the reader
// cannot take on the tail.
func (f *followSource) unaligned(e *ringEntry) bool {
	return e.txn.Partial && !e.txn.Continued && !f.aligned
}

// count keeps track of how much of a chunked transaction was delivered.
func (f *followSource) count(txn *source.Txn) *source.Txn {
	switch {
	case txn.Partial:
		f.open += len(txn.Events)
	case !txn.Heartbeat:
		f.open = 0
	}
	return txn
}

// openPrivate starts the reader's own VStream at its position; inside a
// chunked transaction it skips the events delivered already.
func (f *followSource) openPrivate() {
	var opts []source.ReadOption
	if f.open > 0 {
		opts = append(opts, source.ResumeInTxn(f.open))
	}
	f.private = f.h.up.Open(f.h.ctx, f.def, f.pos, opts...)
}

// errJoinCheckDue ends a wait on the catch-up VStream that has gone on
// long enough for another attempt to join the tail.
var errJoinCheckDue = errors.New("hub: time to try joining the tail")

// nextPrivate reads the catch-up VStream. With nothing buffered it may be
// at the live end, where nothing more may come for a while (until vtgate's
// next heartbeat): the wait is cut at the next join attempt's time.
func (f *followSource) nextPrivate(ctx context.Context) (*source.Txn, error) {
	if f.t == nil || f.private.Buffered() > 0 {
		return f.private.Next(ctx)
	}
	wctx, cancel := context.WithDeadline(ctx, f.lastJoinCheck.Add(joinCheckIdle))
	defer cancel()
	txn, err := f.private.Next(wctx)
	if err != nil && ctx.Err() == nil && wctx.Err() != nil {
		return nil, errJoinCheckDue
	}
	return txn, err
}

func (f *followSource) TryNext() (*source.Txn, bool, error) {
	for {
		if f.ring != nil {
			e, err := f.ring.get(context.Background(), f.seq, false)
			if err != nil {
				if streamEnded(err) {
					return nil, false, err
				}
				f.leave(err)
				continue
			}
			if e == nil {
				return nil, false, nil
			}
			if f.unaligned(e) {
				f.leave(errChunkUnaligned)
				continue
			}
			f.seq++
			if txn, ok := f.take(e); ok {
				return f.count(txn), true, nil
			}
			continue
		}
		if f.private == nil {
			if f.tryJoin() {
				continue
			}
			f.openPrivate()
		}
		txn, ok, err := f.private.TryNext()
		if ok {
			f.sinceJoinCheck++
			f.tok, f.shared = "", nil
			if !txn.Heartbeat {
				f.pos = txn.VGtid
			}
			f.count(txn)
		}
		return txn, ok, err
	}
}

// take turns ring entry e into the reader's delivery, or reports false when
// the reader has it already (its position holds e on every shard e moves).
func (f *followSource) take(e *ringEntry) (*source.Txn, bool) {
	if e.txn.Heartbeat {
		out := *e.txn
		out.VGtid = f.pos
		f.tok, f.shared = "", nil
		return &out, true
	}
	if !f.aligned && len(e.moved) > 0 && f.holds(e) {
		return nil, false
	}
	if f.aligned {
		f.pos = e.after
	} else {
		f.pos = position.Of(f.pos).Advance(position.Of(e.after), e.moved).VGtid()
		f.aligned = position.Of(f.pos).Identical(position.Of(e.after))
	}
	if f.aligned && !e.txn.Partial && e.shared != nil {
		f.tok, f.shared = e.shared.Cursor, e.shared
		return e.shared.Txn, true
	}
	f.tok, f.shared = "", nil
	if f.aligned && !e.txn.Partial {
		f.tok, _ = e.token(func(v *binlogdatapb.VGtid) (string, error) {
			return f.h.Token(context.Background(), f.def, v)
		})
	}
	out := *e.txn
	out.VGtid = f.pos
	return &out, true
}

// holds reports whether the reader's position already includes every shard
// position e moves to (DESIGN §5.3), on the keyspace e is on: a stream's
// tables can move to another (DESIGN §4.1).
func (f *followSource) holds(e *ringEntry) bool {
	after := position.Of(e.after)
	return position.Of(f.pos).Holds(after.Keyspace(f.def.Keyspace), after, e.moved)
}

// cursorToken returns the token of the last delivery when it is the
// tail's own (shared by every reader in step with the tail), or "".
func (f *followSource) cursorToken() string { return f.tok }

// sharedDelivery returns the tail's delivery of the last transaction when
// the reader's is that one, or nil.
func (f *followSource) sharedDelivery() *Delivery { return f.shared }

func (f *followSource) Buffered() int {
	if f.ring != nil {
		return f.ring.available(f.seq)
	}
	if f.private != nil {
		return f.private.Buffered()
	}
	return 0
}

// Close may be called more than once (a parked subscription's timer and
// its owner), never concurrently with Next.
func (f *followSource) Close() {
	f.closed.Do(func() {
		if f.private != nil {
			f.private.Close()
		}
		if f.t != nil && !f.rider {
			f.t.release()
		}
	})
}

// park registers, for a reader following the tail at its head, wake to
// run when the tail has more (see Subscription.Park).
func (f *followSource) park(wake func()) (*Parked, bool) {
	if f.ring == nil && f.private == nil {
		f.tryJoin() // as the next read would: a reader from "now" joins at the head
	}
	if f.ring == nil {
		return nil, false
	}
	return f.ring.park(f.seq, wake)
}

// onTail reports whether the reader currently follows the tail.
func (f *followSource) onTail() bool { return f.ring != nil }
