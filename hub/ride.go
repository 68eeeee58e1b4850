package hub

import (
	"context"
	"errors"

	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"

	"github.com/vstream-gateway/vstream-gateway/position"
	"github.com/vstream-gateway/vstream-gateway/source"
)

// ErrRideEnded ends a TailRide: the tail stopped (no readers for its idle
// time, or its VStream failed), the rider fell out of its ring, or the
// tail moved on to another keyspace with its stream's tables.
var ErrRideEnded = errors.New("hub: the tail ridden stopped or moved on")

// TailRide follows the running tail of a stream from a position, for the
// journal watcher of the stream's keyspace (DESIGN §4 rule 2): the tail's
// VStream sees every journal of the keyspace and moves with its position,
// whatever the stream's filter, so the watcher needs no VStream (no binlog
// dump thread) of its own while one runs. A ride does not count as one of
// the tail's users: a tail kept alive for the watcher alone would read
// every row of the stream's tables with nobody to read them, where the
// watcher's own VStream selects none. It never reads privately either: off
// the tail, it ends, and the watcher opens its own VStream.
type TailRide struct {
	f        *followSource
	keyspace string
	// Stream names the stream whose tail is ridden.
	Stream string
}

// RideTail returns a ride on the running tail of a stream of keyspace
// whose ring covers from, or false when no running tail does.
func (h *Hub) RideTail(keyspace string, from *binlogdatapb.VGtid) (*TailRide, bool) {
	if !joinable(from) || position.Of(from).Keyspace(keyspace) != keyspace {
		return nil, false
	}
	h.mu.Lock()
	var tails []*tail
	for _, t := range h.tails {
		if t.spec.Keyspace == keyspace {
			tails = append(tails, t)
		}
	}
	h.mu.Unlock()
	for _, t := range tails {
		f := &followSource{h: h, def: t.def, pos: from, t: t, rider: true}
		if f.tryJoin() {
			return &TailRide{f: f, keyspace: keyspace, Stream: t.def.Name}, true
		}
	}
	return nil, false
}

// Next returns the tail's next transaction, its position the rider's own
// (DESIGN §5.3), or an error wrapping ErrRideEnded.
func (r *TailRide) Next(ctx context.Context) (*source.Txn, error) {
	txn, err := r.f.Next(ctx)
	if err != nil {
		return nil, err
	}
	if position.Of(txn.VGtid).Keyspace(r.keyspace) != r.keyspace {
		// The stream followed its tables to another keyspace (DESIGN
		// §4.1): the watcher of this one reads on by itself.
		return nil, ErrRideEnded
	}
	return txn, nil
}

// Close ends the ride.
func (r *TailRide) Close() { r.f.Close() }
