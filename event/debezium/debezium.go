// Package debezium re-encodes change events in the envelope of Debezium's
// Vitess connector (debezium-connector-vitess), so that consumers written
// for it read the gateway's streams unchanged (DESIGN §3.2).
//
// An event of this format is
//
//	{"type":"change","key":KEY,"value":{"before":…,"after":…,"source":{…},
//	 "op":"c","ts_ms":…,"transaction":{…}},"cursor":"…"}
//
// where key and value are what the connector writes as a Kafka record's
// key and value with the JSON converter (with schemas=true each is a
// {"schema":…,"payload":…} document). Control events and the cursor are
// the gateway's own and stay as they are: the format changes rows only.
//
// Events are re-encoded from the default format's bytes and the columns'
// kinds (event.Schema), not from vtgate's rows: a transaction is read and
// decoded once, and re-encoded once per format its readers ask for.
package debezium

import (
	"time"

	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"

	"github.com/vstream-gateway/vstream-gateway/event"
)

// Version is the envelope's source.version: it names the producer and the
// revision of this encoding, not a Debezium release.
const Version = "vstream-gateway-1"

// Options say what the stream is called and whether schemas are wanted.
type Options struct {
	// Stream is the stream's name: source.name, and the prefix of the
	// schema names (<stream>.<keyspace>.<table>.Envelope), as the
	// connector's topic.prefix.
	Stream string
	// Schemas wraps key and value in {"schema":…,"payload":…} documents
	// (the JSON converter's schemas.enable=true).
	Schemas bool
}

// Key names the options as a cache key (source.Txn.Encoded).
func (o Options) Key() string {
	if o.Schemas {
		return "debezium+schemas:" + o.Stream
	}
	return "debezium:" + o.Stream
}

// Txn is the transaction whose events are re-encoded.
type Txn struct {
	Events []event.Event
	// VGtid is the position after the transaction: source.vgtid and
	// transaction.id.
	VGtid *binlogdatapb.VGtid
	// CommitTS is the commit time in Unix seconds (0 for copy rows).
	CommitTS int64
	// Received is when the gateway read the transaction: ts_ms, and
	// source.ts_ms of copy rows, which no commit made.
	Received time.Time
	// Chunked marks a piece of a transaction delivered in pieces (DESIGN
	// §3.1): its position is not the transaction's, and its events' order
	// in the transaction is not known here, so it has no transaction block.
	Chunked bool
}

// Encode returns t's events in the Debezium format: one event per row
// change (two for an update that changes the primary key: a delete, then a
// create, as the connector emits them), control events unchanged. The
// events share one new buffer; t's are not modified.
func Encode(t Txn, o Options) []event.Event {
	e := newTxnEncoder(t, o)
	out := make([]event.Event, 0, len(t.Events)+1)
	for i := range t.Events {
		ev := &t.Events[i]
		if ev.Type != event.TypeChange {
			out = append(out, *ev)
			e.ends = append(e.ends, -1)
			e.tails = append(e.tails, nil)
			continue
		}
		for _, part := range e.change(ev) {
			c := *ev
			c.Op = part
			out = append(out, c)
		}
	}
	e.finish(out)
	e.release()
	return out
}

// finish gives each event its bytes, copied from the scratch buffer into
// the encoder's slab: blocks shared with the events of other
// transactions, as the default format's events are (event.Slab), rather
// than allocations of each transaction's own.
func (e *txnEncoder) finish(out []event.Event) {
	start := 0
	for i, end := range e.ends {
		if end < 0 {
			continue
		}
		out[i].JSON = e.slab.Copy(e.buf[start:end])
		out[i].Tail = e.tails[i]
		start = end
	}
}

const maxScratch = 1 << 20
