package reshard

import (
	"context"
	"errors"
	"log/slog"
	"time"

	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"

	"github.com/vstream-gateway/vstream-gateway/position"
	"github.com/vstream-gateway/vstream-gateway/source"
)

// WatchFeed is what the watcher reads journals and positions from: its own
// no-row VStream (a *source.Reader) or a ride on a stream's tail.
type WatchFeed interface {
	Next(ctx context.Context) (*source.Txn, error)
	Close()
}

// TailRider lends the watcher of keyspace a running stream tail whose
// history covers from (the hub's RideTail): the tail's VStream sees every
// journal of the keyspace, so the watcher needs no VStream of its own while
// one runs. stream names the stream ridden; the feed's Next fails with an
// error wrapping rideEnded once the tail stops or moves on.
type TailRider func(keyspace string, from *binlogdatapb.VGtid) (feed WatchFeed, stream string, ok bool)

// WithTailRider lets the watcher ride stream tails (DESIGN §4 rule 2);
// rideEnded is the error a ride ends with.
func WithTailRider(ride TailRider, rideEnded error) WatcherOption {
	return func(w *Watcher) { w.ride, w.rideEnded = ride, rideEnded }
}

// defaultRideCheck is how often a watcher on its own VStream looks for a
// tail to ride.
const defaultRideCheck = 5 * time.Second

// watchFeed is the watcher's current feed: a tail's, while one runs and
// covers its position, else its own VStream; it switches between them at
// a transaction's end, where its position is whole.
type watchFeed struct {
	w      *Watcher
	ks     string
	log    *slog.Logger
	feed   WatchFeed
	riding string              // the stream whose tail is ridden, "" on the own VStream
	pos    *binlogdatapb.VGtid // after the last transaction read
	looked time.Time           // the last look for a tail to ride
}

func (w *Watcher) openFeed(ctx context.Context, ks string, from *binlogdatapb.VGtid, log *slog.Logger) *watchFeed {
	f := &watchFeed{w: w, ks: ks, log: log, pos: from}
	if !f.tryRide() {
		f.own(ctx)
	}
	return f
}

// tryRide switches to a ride on a tail that covers the position.
func (f *watchFeed) tryRide() bool {
	f.looked = time.Now()
	if f.w.ride == nil || !position.Of(f.pos).Concrete() {
		return false
	}
	feed, stream, ok := f.w.ride(f.ks, f.pos)
	if !ok {
		return false
	}
	if f.feed != nil {
		f.feed.Close()
	}
	f.feed, f.riding = feed, stream
	f.log.Info("journal watcher riding a stream's tail: no VStream of its own", "stream", stream)
	return true
}

// own opens the watcher's own no-row VStream at the position.
func (f *watchFeed) own(ctx context.Context) {
	if f.feed != nil {
		f.feed.Close()
	}
	f.feed = f.w.src.Open(ctx, source.Spec{Name: "journal-watcher/" + f.ks, Keyspace: f.ks, Rules: noRows}, f.pos)
	f.riding = ""
}

// next returns the next transaction from whichever feed serves: a ride
// that ends is followed by the own VStream from where it ended, and the
// own VStream gives way to a tail that covers its position.
func (f *watchFeed) next(ctx context.Context) (*source.Txn, error) {
	for {
		if f.riding == "" && time.Since(f.looked) >= f.w.rideCheck {
			f.tryRide()
		}
		txn, err := f.read(ctx)
		if errors.Is(err, errRideCheckDue) {
			continue
		}
		if err != nil && f.riding != "" && ctx.Err() == nil && errors.Is(err, f.w.rideEnded) {
			f.log.Info("journal watcher: the tail it rode stopped; reading on its own VStream", "stream", f.riding, "reason", err)
			f.own(ctx)
			continue
		}
		if err != nil {
			return nil, err
		}
		f.pos = txn.VGtid
		return txn, nil
	}
}

// errRideCheckDue ends a wait on the own VStream when it is time to look
// for a tail again: at the live end nothing may come for a while (until
// vtgate's next heartbeat), and the reader goes on reading (only the wait
// is cut).
var errRideCheckDue = errors.New("reshard: time to look for a tail to ride")

func (f *watchFeed) read(ctx context.Context) (*source.Txn, error) {
	if f.riding != "" || f.w.ride == nil {
		return f.feed.Next(ctx)
	}
	wctx, cancel := context.WithDeadline(ctx, f.looked.Add(f.w.rideCheck))
	defer cancel()
	txn, err := f.feed.Next(wctx)
	if err != nil && ctx.Err() == nil && wctx.Err() != nil {
		return nil, errRideCheckDue
	}
	return txn, err
}

func (f *watchFeed) close() { f.feed.Close() }
