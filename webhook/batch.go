package webhook

import (
	"context"
	"crypto/sha256"
	"encoding/base32"
	"strconv"
	"strings"
	"time"

	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"

	"github.com/vstream-gateway/vstream-gateway/feed"
	"github.com/vstream-gateway/vstream-gateway/hub"
	"github.com/vstream-gateway/vstream-gateway/position"
	"github.com/vstream-gateway/vstream-gateway/streams"
)

// Feed is an ordered view of a stream, one whole transaction at a time:
// what *hub.Subscription provides.
type Feed interface {
	feed.Reader
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
	// part numbers the batches of one chunked transaction from 1 (0: whole
	// transactions); more: parts of it follow, and there is no cursor.
	part int
	more bool
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
// A part of a chunked transaction carries "part" (from 1), and all but the
// last "more":true and no cursor:
//
//	{"type":"changes","id":"msg_…","webhook":"wh_…","stream":"…","part":1,"more":true,"events":[…]}
//
// The body holds nothing that changes between attempts (no send time): a
// retry is byte-for-byte the same message.
func (b *batch) finish(webhookID, stream, id string) {
	if id == "" {
		id = messageID(webhookID, b.start, b.end, b.part)
	}
	b.id = id
	out := make([]byte, 0, len(b.buf)+len(b.cursor)+len(stream)+128)
	out = append(out, `{"type":"changes","id":"`...)
	out = append(out, id...)
	out = append(out, `","webhook":"`...)
	out = append(out, webhookID...)
	out = append(out, `","stream":"`...)
	out = append(out, stream...) // stream names are [A-Za-z0-9_.-]: no escaping needed
	out = append(out, '"')
	if b.cursor != "" {
		out = append(out, `,"cursor":"`...)
		out = append(out, b.cursor...)
		out = append(out, '"')
	}
	if b.part > 0 {
		out = append(out, `,"part":`...)
		out = strconv.AppendInt(out, int64(b.part), 10)
	}
	if b.more {
		out = append(out, `,"more":true`...)
	}
	out = append(out, `,"events":[`...)
	out = append(out, b.buf...)
	out = append(out, "]}"...)
	b.body, b.buf = out, nil
}

var idEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// messageID derives a batch's webhook-id from the webhook and the
// positions it spans (and, for a part of a chunked transaction, which
// part: every part but the last spans nothing), so that a batch rebuilt by
// another replica after a takeover, or a transaction read again after a
// restart, gets the id the receiver may already have seen.
func messageID(webhookID string, start, end *binlogdatapb.VGtid, part int) string {
	h := sha256.New()
	h.Write([]byte(webhookID))
	h.Write([]byte{0})
	b, _ := position.Of(start).Marshal()
	h.Write(b)
	h.Write([]byte{0})
	b, _ = position.Of(end).Marshal()
	h.Write(b)
	if part > 0 {
		h.Write([]byte{0})
		h.Write(strconv.AppendInt(nil, int64(part), 10))
	}
	return "msg_" + strings.ToLower(idEncoding.EncodeToString(h.Sum(nil)[:16]))
}
