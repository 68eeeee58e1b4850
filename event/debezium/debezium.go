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
	"strconv"
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
			continue
		}
		for _, part := range e.change(ev) {
			c := *ev
			c.Op = part
			out = append(out, c)
		}
	}
	// The buffer has its final size now: cut each event's bytes from it.
	start := 0
	for i, end := range e.ends {
		if end < 0 {
			continue
		}
		out[i].JSON = e.buf[start:end:end]
		start = end
	}
	return out
}

// txnEncoder holds what every event of one transaction shares.
type txnEncoder struct {
	t      Txn
	o      Options
	buf    []byte
	vgtid  []byte // source.vgtid, a JSON string
	nameQ  []byte // the stream name, a JSON string
	tsMS   int64
	total  int64
	orders map[string]int64 // data_collection_order per keyspace.table
	parts  [2]event.Op
	// ends is where each event ends in buf, -1 for a control event
	// passed through.
	ends []int
}

func newTxnEncoder(t Txn, o Options) *txnEncoder {
	e := &txnEncoder{t: t, o: o, tsMS: t.Received.UnixMilli(), ends: make([]int, 0, len(t.Events)+1)}
	e.vgtid = appendQuoted(nil, vgtidJSON(t.VGtid))
	e.nameQ = appendString(nil, o.Stream)
	size := 0
	for i := range t.Events {
		size += len(t.Events[i].JSON)*2 + 400 + len(e.vgtid)*2
	}
	e.buf = make([]byte, 0, size)
	return e
}

// vgtidJSON is a position as the connector writes it:
// [{"keyspace":"…","shard":"…","gtid":"…"},…].
func vgtidJSON(v *binlogdatapb.VGtid) []byte {
	b := []byte{'['}
	for i, sg := range v.GetShardGtids() {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"keyspace":`...)
		b = appendString(b, sg.GetKeyspace())
		b = append(b, `,"shard":`...)
		b = appendString(b, sg.GetShard())
		b = append(b, `,"gtid":`...)
		b = appendString(b, sg.GetGtid())
		b = append(b, '}')
	}
	return append(b, ']')
}

// tableOf is the encoder's view of an event's table (nil: the event has no
// schema, and its values are passed through).
func (e *txnEncoder) tableOf(ev *event.Event) *table {
	if ev.Schema == nil {
		return nil
	}
	return ev.Schema.Derived("debezium:"+e.o.Stream, func() any { return compile(ev.Schema, e.o.Stream) }).(*table)
}

// change appends the Debezium event(s) of one change event to e.buf and
// returns their ops.
func (e *txnEncoder) change(ev *event.Event) []event.Op {
	tbl := e.tableOf(ev)
	var before, after []byte
	members(ev.JSON, func(name, v []byte) bool {
		switch string(name) {
		case `"before"`:
			before = v
		case `"after"`:
			after = v
		}
		return true
	})
	if ev.Op == event.OpUpdate && tbl != nil && tbl.hasPK {
		oldKey := tbl.appendKey(nil, before)
		newKey := tbl.appendKey(nil, after)
		if string(oldKey) != string(newKey) {
			// The connector's primary-key update: a delete of the old
			// key, then a create of the new one, each naming the other.
			e.appendEvent(ev, tbl, "d", before, nil, oldKey, "__debezium.newkey", newKey)
			e.appendEvent(ev, tbl, "c", nil, after, newKey, "__debezium.oldkey", oldKey)
			e.parts = [2]event.Op{event.OpDelete, event.OpInsert}
			return e.parts[:]
		}
	}
	op := opCode(ev.Op)
	var key []byte
	switch {
	case tbl == nil || !tbl.hasPK:
	case ev.Op == event.OpDelete:
		key = tbl.appendKey(nil, before)
	default:
		key = tbl.appendKey(nil, after)
	}
	e.appendEvent(ev, tbl, op, before, after, key, "", nil)
	e.parts[0] = ev.Op
	return e.parts[:1]
}

func opCode(op event.Op) string {
	switch op {
	case event.OpInsert:
		return "c"
	case event.OpUpdate:
		return "u"
	case event.OpDelete:
		return "d"
	}
	return "r"
}

// appendEvent appends one event without its closing brace. key is the
// transcoded key (nil: null); header, when set, names headerKey in a
// "headers" member (the connector's message headers of a key change).
func (e *txnEncoder) appendEvent(ev *event.Event, tbl *table, op string, before, after, key []byte, header string, headerKey []byte) {
	b := append(e.buf, `{"type":"change","key":`...)
	b = e.appendKeyDoc(b, tbl, key)
	b = append(b, `,"value":`...)
	if e.o.Schemas {
		b = append(b, `{"schema":`...)
		if tbl != nil {
			b = append(b, tbl.valueSchema...)
		} else {
			b = append(b, "null"...)
		}
		b = append(b, `,"payload":`...)
	}
	b = append(b, `{"before":`...)
	b = tbl.appendImage(b, before)
	b = append(b, `,"after":`...)
	b = tbl.appendImage(b, after)
	b = e.appendSource(b, ev)
	b = append(b, `,"op":"`...)
	b = append(b, op...)
	b = append(b, `","ts_ms":`...)
	b = strconv.AppendInt(b, e.tsMS, 10)
	b = append(b, `,"transaction":`...)
	b = e.appendTransaction(b, ev)
	b = append(b, '}')
	if e.o.Schemas {
		b = append(b, '}')
	}
	if header != "" {
		b = append(b, `,"headers":{"`...)
		b = append(b, header...)
		b = append(b, `":`...)
		b = e.appendKeyDoc(b, tbl, headerKey)
		b = append(b, '}')
	}
	e.buf = b
	e.ends = append(e.ends, len(b))
}

// appendKeyDoc writes a key: its payload, or with schemas its document.
func (e *txnEncoder) appendKeyDoc(b []byte, tbl *table, key []byte) []byte {
	if !e.o.Schemas {
		if key == nil {
			return append(b, "null"...)
		}
		return append(b, key...)
	}
	b = append(b, `{"schema":`...)
	if key == nil {
		b = append(b, `null,"payload":null}`...)
		return b
	}
	b = append(b, tbl.keySchema...)
	b = append(b, `,"payload":`...)
	b = append(b, key...)
	return append(b, '}')
}

func (e *txnEncoder) appendSource(b []byte, ev *event.Event) []byte {
	b = append(b, `,"source":{"version":"`+Version+`","connector":"vitess","name":`...)
	b = append(b, e.nameQ...)
	b = append(b, `,"ts_ms":`...)
	ms := e.t.CommitTS * 1000
	if ms == 0 {
		ms = e.tsMS
	}
	b = strconv.AppendInt(b, ms, 10)
	if ev.Op == event.OpSnapshot {
		b = append(b, `,"snapshot":"true"`...)
	} else {
		b = append(b, `,"snapshot":"false"`...)
	}
	b = append(b, `,"db":"","sequence":null,"keyspace":`...)
	b = appendString(b, ev.Keyspace)
	b = append(b, `,"table":`...)
	b = appendString(b, ev.Table)
	b = append(b, `,"shard":`...)
	b = appendString(b, ev.Shard)
	b = append(b, `,"vgtid":`...)
	b = append(b, e.vgtid...)
	return append(b, '}')
}

// appendTransaction writes the transaction block: null for copy rows
// (Debezium's snapshot events have none) and for pieces of a chunked
// transaction.
func (e *txnEncoder) appendTransaction(b []byte, ev *event.Event) []byte {
	if ev.Op == event.OpSnapshot || e.t.Chunked {
		return append(b, "null"...)
	}
	e.total++
	dc := ev.Keyspace + "." + ev.Table
	if e.orders == nil {
		e.orders = make(map[string]int64, 1)
	}
	e.orders[dc]++
	b = append(b, `{"id":`...)
	b = append(b, e.vgtid...)
	b = append(b, `,"total_order":`...)
	b = strconv.AppendInt(b, e.total, 10)
	b = append(b, `,"data_collection_order":`...)
	b = strconv.AppendInt(b, e.orders[dc], 10)
	return append(b, '}')
}

// appendImage writes a row image (the default format's object, or null)
// with every value re-encoded. Without a table the image is copied.
func (t *table) appendImage(b []byte, img []byte) []byte {
	if len(img) == 0 || img[0] != '{' {
		return append(b, "null"...)
	}
	if t == nil {
		return append(b, img...)
	}
	b = append(b, '{')
	i := 0
	members(img, func(name, v []byte) bool {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, name...)
		b = append(b, ':')
		b = appendValue(b, t.column(i, name), v)
		i++
		return true
	})
	return append(b, '}')
}

// appendKey writes the primary-key columns of a row image as an object.
func (t *table) appendKey(b []byte, img []byte) []byte {
	b = append(b, '{')
	i, n := 0, 0
	members(img, func(name, v []byte) bool {
		c := t.column(i, name)
		i++
		if c == nil || !c.PK {
			return true
		}
		if n > 0 {
			b = append(b, ',')
		}
		n++
		b = append(b, name...)
		b = append(b, ':')
		b = appendValue(b, c, v)
		return true
	})
	return append(b, '}')
}

// column finds the column of an image's i-th member: by position (images
// hold every column in order), else by name; nil if unknown (its value is
// passed through).
func (t *table) column(i int, quoted []byte) *event.Column {
	if i < len(t.cols) && string(t.cols[i].quoted) == string(quoted) {
		return t.cols[i].Column
	}
	if j, ok := t.byName[string(quoted)]; ok {
		return t.cols[j].Column
	}
	return &unknownColumn
}

var unknownColumn = event.Column{Kind: event.KindUnknown, Optional: true}
