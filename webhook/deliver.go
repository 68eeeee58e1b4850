package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"

	"github.com/vstream-gateway/vstream-gateway/feed"
	"github.com/vstream-gateway/vstream-gateway/hub"
	"github.com/vstream-gateway/vstream-gateway/metrics"
	"github.com/vstream-gateway/vstream-gateway/position"
	"github.com/vstream-gateway/vstream-gateway/reshard"
	"github.com/vstream-gateway/vstream-gateway/store"
	"github.com/vstream-gateway/vstream-gateway/streams"
	"github.com/vstream-gateway/vstream-gateway/upstream"
)

// deliverer delivers one webhook while this replica holds its lease. Every
// store write it makes is fenced with the lease's token: once the lease is
// lost (expired, taken over, revoked) its writes fail and it stops, so a
// paused or partitioned replica can neither move the cursor nor
// dead-letter a batch behind the new holder's back.
type deliverer struct {
	s     *Service
	def   *streams.Definition
	wh    atomic.Pointer[Webhook] // refreshed by the supervisor (secret rotation, settings)
	lease store.Lease
	log   *slog.Logger
}

func newDeliverer(s *Service, def *streams.Definition, w *Webhook, l store.Lease) *deliverer {
	d := &deliverer{s: s, def: def, lease: l,
		log: s.log.With("webhook", w.ID, "stream", w.Stream, "lease_token", l.Token)}
	d.wh.Store(w)
	return d
}

// run delivers until ctx ends or the deliverer must stop. Source failures
// (vtgate unreachable, a stream error) reopen the subscription from the
// stored cursor after a backoff.
func (d *deliverer) run(ctx context.Context) error {
	eb := d.s.backoff.schedule()
	for {
		progressed, err := d.session(ctx)
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, errStopped), errors.Is(err, ErrGone), errors.Is(err, ErrStreamEnded):
			return err
		}
		// Reopening from the stored cursor would end the same way,
		// forever and out of sight: the webhook stops, and says so.
		var dropped *upstream.TablesDroppedError
		if errors.As(err, &dropped) {
			return d.ended(ctx, "tables_dropped", err)
		}
		var gap *reshard.GapError
		if errors.As(err, &gap) {
			return d.ended(ctx, "reshard_gap", err)
		}
		if progressed {
			eb.Reset()
		}
		wait := eb.NextBackOff()
		d.log.Warn("webhook delivery interrupted; resuming from the stored cursor", "err", err, "retry_in", wait)
		if err := d.s.sleep(ctx, wait); err != nil {
			return err
		}
	}
}

// session is one subscription's worth of delivery.
type session struct {
	d      *deliverer
	feed   Feed
	c      *feed.Collector     // batches of ss.feed
	start  *binlogdatapb.VGtid // the stored cursor
	pos    *binlogdatapb.VGtid // the position read up to
	target *inflight           // a recorded batch to rebuild first
}

func (d *deliverer) session(ctx context.Context) (progressed bool, err error) {
	wh := d.wh.Load()
	ss := &session{d: d}
	cs, err := d.s.cursors.Get(ctx, wh.Stream, wh.Subscriber())
	switch {
	case err == nil:
		ss.start = cs.VGtid
	case !errors.Is(err, store.ErrNotFound):
		return false, err
	}
	// A batch recorded by a previous holder (or an earlier session) that
	// starts at the stored cursor may have reached the receiver: rebuild
	// exactly it, and send it under its id.
	rec, err := d.s.repo.inflight(ctx, wh.ID)
	if err != nil {
		return false, err
	}
	if rec != nil && len(rec.End) > 0 {
		if start, err := position.Unmarshal(rec.Start); err == nil && start.Identical(position.Of(ss.start)) {
			ss.target = rec
		}
	}
	// A recorded batch with its body is re-sent exactly as it was, and the
	// stream opens after it.
	if rec := ss.target; rec != nil && len(rec.Body) > 0 {
		if end, err := position.Unmarshal(rec.End); err == nil && !end.IsZero() {
			// Its read time is gone with the earlier session; its first
			// attempt is the earliest time known, so that its delivery
			// latency is measured (from then) rather than not at all.
			b := &batch{id: rec.ID, start: ss.start, end: end.VGtid(), cursor: rec.Cursor, events: rec.Events, body: rec.Body, firstRecv: rec.FirstAttemptAt}
			ss.target = nil
			if err := ss.deliver(ctx, b, rec); err != nil {
				return progressed, err
			}
			ss.start, progressed = end.VGtid(), true
		}
	}
	ss.feed, err = d.s.src.Open(ctx, d.def, hub.From{Subscriber: wh.Subscriber()})
	if err != nil {
		return false, err
	}
	ss.feed = withFormat(ss.feed, wh.format())
	defer ss.feed.Close()
	// Idle means no events for idleAck, whatever else arrives: vtgate's
	// heartbeats (every second) and transactions the filter emptied would
	// otherwise keep a webhook that matches nothing from ever storing the
	// position it has read up to.
	ss.c = feed.NewCollector(ss.feed, feed.IdleEvery(d.s.idleAck), feed.SplitTxns())
	for {
		b, err := ss.collect(ctx)
		if err != nil {
			return progressed, err
		}
		rec := ss.target
		if rec == nil || rec.ID != b.id {
			start, _ := position.Of(b.start).Marshal()
			end, _ := position.Of(b.end).Marshal()
			rec = &inflight{ID: b.id, Start: start, End: end, Events: b.events, Body: b.body, Cursor: b.cursor}
		}
		ss.target = nil
		if err := ss.deliver(ctx, b, rec); err != nil {
			return progressed, err
		}
		ss.start, progressed = b.end, true
	}
}

// collect reads the next batch: it blocks for the first transaction with
// events, then takes whole transactions that are ready (or arrive within
// batch_max_wait) while they fit in batch_max_events and batch_max_bytes.
// A whole transaction larger is a batch of its own; a chunked one is cut
// into parts (feed.SplitTxns, DESIGN §8). A
// batch recorded before a takeover is rebuilt to its recorded end instead.
func (ss *session) collect(ctx context.Context) (*batch, error) {
	d := ss.d
	wh := d.wh.Load()
	b := &batch{start: ss.start}
	var targetEnd position.Position
	if ss.target != nil {
		targetEnd, _ = position.Unmarshal(ss.target.End)
	}
	var err error
	if !targetEnd.IsZero() {
		err = ss.rebuild(ctx, b, targetEnd)
	} else {
		var res feed.Collected
		lim := feed.Limits{Events: wh.BatchMaxEvents, Bytes: wh.MaxBytes(), Linger: wh.BatchMaxWait.D()}
		for {
			res, err = ss.c.Collect(ctx, collecting{ss, b}, lim)
			if !errors.Is(err, feed.ErrIdle) {
				break
			}
			if err = ss.idle(ctx); err != nil {
				break
			}
		}
		b.part, b.more = res.Part, res.Partial
	}
	if err != nil {
		return nil, err
	}
	id := ""
	if ss.target != nil {
		id = ss.target.ID
	}
	b.finish(wh.ID, wh.Stream, id)
	if b.firstRecv.IsZero() {
		// Transactions replayed from a bridge spool, and the gateway's own
		// notices, carry no read time: the batch's is when it was built,
		// so that its delivery latency is still measured.
		b.firstRecv = d.s.now()
	}
	d.s.metrics.setLag(wh.ID, b, d.s.now())
	return b, nil
}

// rebuild reads a recorded batch again: its first transaction with events,
// as for any batch, then every transaction up to the recorded end, whatever
// the limits. It is a session's first batch, so the collector holds nothing
// back yet and the rest is read from the feed itself.
func (ss *session) rebuild(ctx context.Context, b *batch, targetEnd position.Position) error {
	dv, err := ss.c.Next(ctx)
	for errors.Is(err, feed.ErrIdle) {
		if err = ss.idle(ctx); err == nil {
			dv, err = ss.c.Next(ctx)
		}
	}
	if err != nil {
		return err
	}
	in := collecting{ss, b}
	in.Add(dv)
	for {
		if position.Of(b.end).Identical(targetEnd) {
			return nil
		}
		if position.Of(b.end).Compare(targetEnd) != position.Before {
			// The stream no longer reproduces the recorded batch (a
			// rebuilt cursor, a copy phase): send what was read as a
			// new batch.
			ss.d.log.Info("webhook: recorded batch not reproducible; sending a new one", "recorded", ss.target.ID)
			ss.target = nil
			return nil
		}
		dv, err := ss.feed.Next(ctx)
		if err != nil {
			return err
		}
		if !dv.Heartbeat {
			in.Add(dv)
		}
	}
}

// collecting is the batch being read, as the collector fills it.
type collecting struct {
	ss *session
	b  *batch
}

// Add implements feed.Batch. Position-only transactions before the batch's
// first events only move the position read up to: the batch starts at the
// stored cursor and spans from there to its last transaction.
func (c collecting) Add(d *hub.Delivery) {
	c.ss.pos = d.VGtid
	if c.b.events == 0 && len(d.Events) == 0 {
		return
	}
	c.b.add(d)
}

// idle runs while no transaction with events comes (feed.ErrIdle): the
// webhook is caught up.
func (ss *session) idle(ctx context.Context) error {
	ss.d.s.metrics.setLag(ss.d.wh.Load().ID, nil, ss.d.s.now())
	return ss.ackIdle(ctx)
}

// ackIdle stores the position of transactions the filter dropped, so an
// idle webhook's cursor keeps up with the binlog.
func (ss *session) ackIdle(ctx context.Context) error {
	if ss.target != nil || !position.Of(ss.pos).Concrete() || position.Of(ss.pos).Identical(position.Of(ss.start)) {
		return nil
	}
	if err := ss.d.ack(ctx, ss.pos); err != nil {
		return err
	}
	ss.start = ss.pos
	return nil
}

// deliver sends b until the receiver confirms it, refuses it for good, or
// max_attempts is reached, and then moves the cursor past it. rec is the
// batch's in-flight record (carrying a previous holder's attempts, if it
// is a rebuilt batch).
func (ss *session) deliver(ctx context.Context, b *batch, rec *inflight) error {
	d, s := ss.d, ss.d.s
	if err := d.putInflight(ctx, rec); err != nil {
		return err
	}
	first := d.wh.Load()
	s.metrics.batchStarted(first.ID, first.Stream)
	defer s.metrics.batchEnded(first.ID)
	eb := s.backoff.schedule()
	for {
		wh := d.wh.Load()
		if wh.Paused {
			return errStopped
		}
		now := s.now()
		if rec.FirstAttemptAt.IsZero() {
			rec.FirstAttemptAt = now.UTC()
		}
		rec.Attempts++
		rec.LastAttemptAt = now.UTC()
		a := post(ctx, s.client, wh, b.id, b.body, now)
		if ctx.Err() != nil {
			return fmt.Errorf("%w: %w", errStopped, ctx.Err())
		}
		switch {
		case a.class == classDelivered:
			s.metrics.observeAttempt(wh.ID, a, attemptSuccess)
		case a.class == classGone:
			s.metrics.observeAttempt(wh.ID, a, attemptDisabled)
		case a.class == classPermanent || rec.Attempts >= wh.MaxAttempts:
			s.metrics.observeAttempt(wh.ID, a, attemptDeadLetter)
		default:
			s.metrics.observeAttempt(wh.ID, a, attemptRetry)
		}
		switch a.class {
		case classDelivered:
			if err := d.ack(ctx, b.end); err != nil {
				return err
			}
			s.metrics.delivered(wh.ID, wh.Stream, b, s.now())
			d.log.Debug("webhook batch delivered", "message", b.id, "events", b.events, "attempts", rec.Attempts, "status", a.status)
			return nil
		case classGone:
			return d.disable(ctx, a)
		}
		rec.LastStatus, rec.LastError = a.status, a.describe()
		if a.class == classPermanent || rec.Attempts >= wh.MaxAttempts {
			reason := ReasonMaxAttempts
			if a.class == classPermanent {
				reason = ReasonPermanent
			}
			return ss.deadLetter(ctx, wh, b, rec, reason)
		}
		delay := s.backoff.delay(eb, a)
		rec.NextAttemptAt = now.Add(delay).UTC()
		if err := d.putInflight(ctx, rec); err != nil {
			return err
		}
		s.metrics.setLag(wh.ID, b, s.now())
		d.log.Info("webhook attempt failed; retrying", "message", b.id, "attempt", rec.Attempts,
			"max_attempts", wh.MaxAttempts, "status", a.status, "class", a.kind, "err", rec.LastError, "retry_in", delay)
		if err := s.sleep(ctx, delay); err != nil {
			return fmt.Errorf("%w: %w", errStopped, err)
		}
	}
}

// deadLetter gives up on b: it is appended to the dead-letter list and the
// cursor moves past it, so the batches after it flow.
func (ss *session) deadLetter(ctx context.Context, wh *Webhook, b *batch, rec *inflight, reason string) error {
	d, s := ss.d, ss.d.s
	rec.NextAttemptAt = time.Time{}
	// Both writes are fenced: a replica that lost the webhook adds no
	// dead letter. The new owner re-sends the batch, and dead-letters it
	// itself if the receiver still refuses it.
	if err := d.putInflight(ctx, rec); err != nil {
		return err
	}
	if err := s.appendDeadLetter(ctx, wh, b, rec, reason, d.lease); err != nil {
		return err
	}
	if err := d.ack(ctx, b.end); err != nil {
		return err
	}
	s.metrics.deliveries.WithLabelValues(wh.ID, "dead_lettered").Inc()
	d.log.Warn("webhook batch dead-lettered", "message", b.id, "events", b.events, "reason", reason,
		"attempts", rec.Attempts, "last_status", rec.LastStatus, "last_error", rec.LastError)
	return nil
}

// disable records that the receiver answered 410 Gone. The batch stays
// undelivered and the cursor where it is: Resume starts again from it.
func (d *deliverer) disable(ctx context.Context, a *attempt) error {
	if err := d.markDisabled(ctx, "receiver answered 410 Gone: "+a.describe()); err != nil {
		return err
	}
	d.log.Warn("webhook disabled: receiver answered 410 Gone", "status", a.status)
	return ErrGone
}

// markDisabled stores the webhook's status as disabled for reason, under
// the delivery's lease, and counts it.
func (d *deliverer) markDisabled(ctx context.Context, reason string) error {
	wh := d.wh.Load()
	st := &Status{Disabled: true, DisabledReason: reason, DisabledAt: d.s.now().UTC()}
	v, _ := json.Marshal(st)
	if err := d.s.st.PutFenced(ctx, nsStatus, wh.ID, v, d.lease.Name, d.lease.Token); err != nil {
		return fenced(err)
	}
	d.s.metrics.deliveries.WithLabelValues(wh.ID, "disabled").Inc()
	return nil
}

// ended disables the webhook whose stream cannot go on from its cursor
// (reason and err say why: its tables were dropped, or its cursor needs
// deleted shards no recorded journal continues, with on_gap fail): the
// cursor stays where it is, after every batch the receiver confirmed.
func (d *deliverer) ended(ctx context.Context, reason string, err error) error {
	if perr := d.markDisabled(ctx, reason+": "+err.Error()); perr != nil {
		return perr
	}
	d.log.Error("webhook disabled: its stream ended", "err", err)
	return fmt.Errorf("%w: %w", ErrStreamEnded, err)
}

// ack moves the webhook's cursor to pos, fenced by the lease.
func (d *deliverer) ack(ctx context.Context, pos *binlogdatapb.VGtid) error {
	wh := d.wh.Load()
	if err := d.s.cursors.AckFenced(ctx, wh.Stream, wh.Subscriber(), pos, d.lease.Name, d.lease.Token); err != nil {
		return fenced(err)
	}
	metrics.CursorWrite(wh.Stream)
	return nil
}

func (d *deliverer) putInflight(ctx context.Context, rec *inflight) error {
	v, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	return fenced(d.s.st.PutFenced(ctx, nsInflight, d.wh.Load().ID, v, d.lease.Name, d.lease.Token))
}

// fenced turns a lost-lease write into errStopped: not a failure to retry
// but the signal to stop.
func fenced(err error) error {
	if errors.Is(err, store.ErrFenced) {
		return fmt.Errorf("%w: %w", errStopped, err)
	}
	return err
}

// withFormat is f with every delivery in format fm (DESIGN §3.2), before
// the collector counts them against batch_max_bytes.
func withFormat(f Feed, fm *feed.Format) Feed {
	if fm == nil {
		return f
	}
	return formattedFeed{Feed: f, r: feed.Formatted(f, fm)}
}

type formattedFeed struct {
	Feed
	r feed.Reader
}

func (f formattedFeed) Next(ctx context.Context) (*hub.Delivery, error) { return f.r.Next(ctx) }

func (f formattedFeed) TryNext(ctx context.Context) (*hub.Delivery, bool, error) {
	return f.r.TryNext(ctx)
}
