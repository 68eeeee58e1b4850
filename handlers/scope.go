package handlers

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/vstream-gateway/vstream-gateway/auth"
	"github.com/vstream-gateway/vstream-gateway/feed"
	"github.com/vstream-gateway/vstream-gateway/hub"
	"github.com/vstream-gateway/vstream-gateway/metrics"
	"github.com/vstream-gateway/vstream-gateway/streams"
)

// outbound is the last step before a transport encodes a delivery: the
// token's table scope is applied (rows of other tables are never sent)
// and what is sent is counted. One per connection or pull request.
// Webhooks have no table scope: they receive the whole stream, and an admin
// creates them.
type outbound struct {
	// tables is swapped by a WebSocket client's refresh to a narrower
	// scope (wsrefresh.go) while the session's writer applies it.
	tables atomic.Pointer[auth.TableFilter]
	m      *metrics.Out
	// format re-encodes deliveries in the reader's format (nil: the
	// default one, DESIGN §3.2), before the scope is applied.
	format *feed.Format
	// tally holds the counts of a burst (applyAt with a tally) until
	// flushTally: the metrics are shared by every connection of a stream,
	// and an update per message and connection had the CPUs trade their
	// cache lines.
	tally outTally
}

// outTally is what a burst sent: events, events withheld, and the last
// lag (when hasLag).
type outTally struct {
	sent, withheld int
	lag            float64
	hasLag         bool
}

// outboundFor returns the outbound step of a request. Requests that did
// not pass the authentication middleware (handlers used on their own, in
// tests) carry no principal and are not filtered: the server installs the
// middleware on every /v1 route.
func outboundFor(ctx context.Context, stream, transport string) *outbound {
	o := &outbound{m: metrics.Outbound(stream, transport), format: formatOf(ctx)}
	if p := auth.FromContext(ctx); p != nil {
		o.tables.Store(p.TableFilter())
	}
	return o
}

// apply returns d with the events the token may not see removed. d itself
// is never modified: the same transaction may go to other clients.
func (o *outbound) apply(d *hub.Delivery) *hub.Delivery { return o.applyAt(d, time.Time{}, false) }

// flushTally reports what applyAt counted into the tally.
func (o *outbound) flushTally() {
	t := o.tally
	if t.sent == 0 && t.withheld == 0 && !t.hasLag {
		return
	}
	lag := -1.0
	if t.hasLag {
		lag = t.lag
	}
	o.m.Sent(t.sent, t.withheld, lag)
	o.tally = outTally{}
}

// applyAt is apply with the clock read by the caller (zero: read here), so
// that a burst of deliveries reads it once; with tally set it counts into
// the outbound's tally, which flushTally reports.
func (o *outbound) applyAt(d *hub.Delivery, now time.Time, tally bool) *hub.Delivery {
	d = o.format.Apply(d)
	kept := d.Events
	if f := o.tables.Load(); f != nil {
		kept = f.Filter(d.Events)
	}
	lag := -1.0
	if d.CommitTS > 0 && len(kept) > 0 {
		if now.IsZero() {
			now = time.Now()
		}
		lag = now.Sub(time.Unix(d.CommitTS, 0)).Seconds()
	}
	if tally {
		o.tally.sent += len(kept)
		o.tally.withheld += len(d.Events) - len(kept)
		if lag >= 0 {
			o.tally.lag, o.tally.hasLag = lag, true
		}
	} else {
		o.m.Sent(len(kept), len(d.Events)-len(kept), lag)
	}
	if len(kept) == len(d.Events) {
		return d
	}
	txn := *d.Txn
	txn.Events = kept
	return &hub.Delivery{Txn: &txn, Cursor: d.Cursor}
}

// scopedSink applies an outbound step in front of a push sink. Deliveries
// that end up empty are still passed on, so that a sink that defers
// flushing (SSE, while more is ready) still flushes at the end of a burst.
type scopedSink struct {
	sink
	o *outbound
}

func (a *API) scoped(ctx context.Context, stream, transport string, s sink) sink {
	return scopedSink{sink: s, o: outboundFor(ctx, stream, transport)}
}

func (s scopedSink) deliver(d *hub.Delivery, more bool) error {
	return s.sink.deliver(s.o.apply(d), more)
}

func (s scopedSink) flushHeld() error { return s.sink.flushHeld() }

// visibleStreams keeps the streams a non-admin token's streams claim
// covers: listing must not reveal streams a client cannot read.
func visibleStreams(ctx context.Context, list []*streams.Definition) []*streams.Definition {
	p := auth.FromContext(ctx)
	if p == nil || p.Admin() {
		return list
	}
	out := make([]*streams.Definition, 0, len(list))
	for _, d := range list {
		if p.MayReadStream(d.Name) {
			out = append(out, d)
		}
	}
	return out
}
