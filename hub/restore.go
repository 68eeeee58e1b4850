package hub

import (
	"context"
	"strings"
	"sync"

	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"
)

// maxKnownCursors bounds what a replica remembers for restoring: named
// subscribers are few (clients with a name, not browser tabs), and one
// entry is a few hundred bytes.
const maxKnownCursors = 50_000

// knownCursors is the last position this replica stored per subscriber.
type knownCursors struct {
	mu   sync.Mutex
	m    map[string]map[string]*binlogdatapb.VGtid // stream → subscriber → position
	n    int
	full bool
}

func (k *knownCursors) remember(stream, sub string, pos *binlogdatapb.VGtid) {
	if strings.HasPrefix(sub, "webhook.") {
		return // a webhook is lost with the store's data, and its cursor with it
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.m == nil {
		k.m = map[string]map[string]*binlogdatapb.VGtid{}
	}
	subs := k.m[stream]
	if subs == nil {
		subs = map[string]*binlogdatapb.VGtid{}
		k.m[stream] = subs
	}
	if _, ok := subs[sub]; !ok {
		if k.n >= maxKnownCursors {
			k.full = true
			return
		}
		k.n++
	}
	subs[sub] = pos
}

func (k *knownCursors) forget(stream, sub string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, ok := k.m[stream][sub]; ok {
		delete(k.m[stream], sub)
		k.n--
	}
}

func (k *knownCursors) forgetStream(stream string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.n -= len(k.m[stream])
	delete(k.m, stream)
}

type knownCursor struct {
	stream, sub string
	pos         *binlogdatapb.VGtid
}

func (k *knownCursors) all() []knownCursor {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []knownCursor
	for stream, subs := range k.m {
		for sub, pos := range subs {
			out = append(out, knownCursor{stream, sub, pos})
		}
	}
	return out
}

// Restored is what Restore did.
type Restored struct {
	Written int // cursors written back
	Current int // cursors the store already had at or past what this replica knew
	// Skipped are stream/subscriber names not written back because their
	// stream no longer exists.
	Skipped []string
	// Incomplete: this replica stopped remembering new subscribers
	// (maxKnownCursors); some it served may be missing.
	Incomplete bool
}

// Restore writes back, after the store lost its data (DESIGN §12), the
// last cursor this replica stored for each subscriber of a stream that
// exists (keep). A cursor never moves back: where the store has one at or
// past it (another replica restored a later ack, or the subscriber acked
// again), it stays. A subscriber whose later acks went to a replica that
// is gone is restored to an older position: it gets repeats, not a gap.
func (c *Cursors) Restore(ctx context.Context, keep func(stream string) bool) (Restored, error) {
	var r Restored
	for _, k := range c.known.all() {
		if !keep(k.stream) {
			r.Skipped = append(r.Skipped, k.stream+"/"+k.sub)
			continue
		}
		stored, err := c.Ack(ctx, k.stream, k.sub, k.pos)
		if err != nil {
			return r, err
		}
		if stored == k.pos {
			r.Written++
		} else {
			r.Current++
		}
	}
	c.known.mu.Lock()
	r.Incomplete = c.known.full
	c.known.mu.Unlock()
	return r, nil
}
