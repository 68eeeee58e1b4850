package webhook

import (
	"context"
	"crypto/sha256"
	"encoding/base32"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"
	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"

	"github.com/vstream-gateway/vstream-gateway/hub"
	"github.com/vstream-gateway/vstream-gateway/streams"
)

// Feed is an ordered view of a stream, one whole transaction at a time:
// what *hub.Subscription provides.
type Feed interface {
	hub.Feed
	Close()
}

// Source opens feeds.
type Source interface {
	Open(ctx context.Context, def *streams.Definition, from hub.From) (Feed, error)
}

// HubSource is the production Source. Webhooks open their subscriptions
// through hub.Open with their subscriber name, like every named
// subscriber, so whatever hub.Open does to a stored cursor (rebuilding it
// across a reshard) applies to webhooks too.
type HubSource struct{ Hub *hub.Hub }

// Open implements Source.
func (s HubSource) Open(ctx context.Context, def *streams.Definition, from hub.From) (Feed, error) {
	sub, err := s.Hub.Open(ctx, def, from)
	if err != nil {
		return nil, err
	}
	return sub, nil
}

// batch is a run of whole transactions sent as one message.
type batch struct {
	id          string              // webhook-id: stable across retries and takeovers
	start       *binlogdatapb.VGtid // the stored cursor the batch follows (nil: stream start)
	end         *binlogdatapb.VGtid // the position after its last transaction
	cursor      string              // token of end
	events      int
	txns        int
	buf         []byte // events, comma-separated finished JSON
	body        []byte
	firstRecv   time.Time // when the gateway read the first transaction
	firstCommit int64     // its commit time (Unix seconds; 0 in a copy phase)
}

// add appends one transaction.
func (b *batch) add(d *hub.Delivery) {
	if b.txns == 0 || b.firstRecv.IsZero() {
		b.firstRecv, b.firstCommit = d.Received, d.CommitTS
	}
	for i := range d.Events {
		if b.events > 0 {
			b.buf = append(b.buf, ',')
		}
		b.buf = d.Events[i].AppendJSON(b.buf, d.Cursor)
		b.events++
	}
	b.txns++
	b.end, b.cursor = d.VGtid, d.Cursor
}

// finish fixes the batch's id (unless it is replaying a recorded one) and
// builds its body:
//
//	{"type":"changes","id":"msg_…","webhook":"wh_…","stream":"…","cursor":"…","events":[…]}
//
// The body holds nothing that changes between attempts (no send time): a
// retry is byte-for-byte the same message.
func (b *batch) finish(webhookID, stream, id string) {
	if id == "" {
		id = messageID(webhookID, b.start, b.end)
	}
	b.id = id
	out := make([]byte, 0, len(b.buf)+len(b.cursor)+len(stream)+128)
	out = append(out, `{"type":"changes","id":"`...)
	out = append(out, id...)
	out = append(out, `","webhook":"`...)
	out = append(out, webhookID...)
	out = append(out, `","stream":"`...)
	out = append(out, stream...) // stream names are [A-Za-z0-9_.-]: no escaping needed
	out = append(out, `","cursor":"`...)
	out = append(out, b.cursor...)
	out = append(out, `","events":[`...)
	out = append(out, b.buf...)
	out = append(out, "]}"...)
	b.body, b.buf = out, nil
}

var idEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// messageID derives a batch's webhook-id from the webhook and the
// positions it spans, so that a batch rebuilt by another replica after a
// takeover gets the id the receiver may already have seen.
func messageID(webhookID string, start, end *binlogdatapb.VGtid) string {
	h := sha256.New()
	h.Write([]byte(webhookID))
	h.Write([]byte{0})
	h.Write(marshalPos(start))
	h.Write([]byte{0})
	h.Write(marshalPos(end))
	return "msg_" + strings.ToLower(idEncoding.EncodeToString(h.Sum(nil)[:16]))
}

func marshalPos(v *binlogdatapb.VGtid) []byte {
	if v == nil {
		return nil
	}
	b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(v)
	return b
}

func unmarshalPos(b []byte) (*binlogdatapb.VGtid, error) {
	if len(b) == 0 {
		return nil, nil
	}
	v := &binlogdatapb.VGtid{}
	if err := proto.Unmarshal(b, v); err != nil {
		return nil, err
	}
	return v, nil
}

func samePos(a, b *binlogdatapb.VGtid) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return proto.Equal(a, b)
}

// concrete reports whether a position names a real GTID for every shard
// (rather than "current" or an unexpanded keyspace).
func concrete(v *binlogdatapb.VGtid) bool {
	if v == nil || len(v.ShardGtids) == 0 {
		return false
	}
	for _, sg := range v.ShardGtids {
		if sg.Shard == "" || sg.Gtid == "" || sg.Gtid == "current" {
			return false
		}
	}
	return true
}
