package debezium

import (
	"strconv"

	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"

	"github.com/vstream-gateway/vstream-gateway/event"
)

// vgtidString is a position as the connector writes it: a JSON string
// holding [{"keyspace":"…","shard":"…","gtid":"…"},…], written at once, the
// inner document's quotes escaped as they are written.
func vgtidString(b []byte, v *binlogdatapb.VGtid) []byte {
	b = append(b, `"[`...)
	for i, sg := range v.GetShardGtids() {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{\"keyspace\":`...)
		b = appendInner(b, sg.GetKeyspace())
		b = append(b, `,\"shard\":`...)
		b = appendInner(b, sg.GetShard())
		b = append(b, `,\"gtid\":`...)
		b = appendInner(b, sg.GetGtid())
		b = append(b, '}')
	}
	return append(b, `]"`...)
}

// appendInner appends s as a JSON string inside a JSON string: quoted, and
// the result escaped again. Names and GTIDs are plain printable ASCII,
// which needs neither step's escapes.
func appendInner(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			return appendEscaped(b, appendString(nil, s))
		}
	}
	b = append(b, `\"`...)
	b = append(b, s...)
	return append(b, `\"`...)
}

// appendEvent appends one event's own bytes to e.buf and notes its tail,
// the part it shares with the transaction's other events of its table and
// shard (event.Event.Tail). key is the re-encoded key (nil: null);
// header, when set, names headerKey in a "headers" member (the connector's
// message headers of a key change).
//
// Members are ordered so that what events share comes last, in the tail:
//
//	{"type":"change","key":K,"value":{"before":B,"after":A,"op":"c",
//	 "transaction":{"total_order":1,"data_collection_order":1,"id":   ← own
//	 "[…]"},"ts_ms":…,"source":{…}}                                  ← tail
//
// With schemas, the value's schema follows its payload, in the tail too;
// in a transaction of a few events (ownTxnPartMax) each event holds its
// transaction's part itself, and the tail is the table's schema alone,
// shared by the events of every transaction.
func (e *txnEncoder) appendEvent(ev *event.Event, tbl *table, op string, before, after, key []byte, header string, headerKey []byte) {
	b := append(e.buf, `{"type":"change","key":`...)
	b = e.appendKeyDoc(b, tbl, key)
	if header != "" {
		b = append(b, `,"headers":{"`...)
		b = append(b, header...)
		b = append(b, `":`...)
		b = e.appendKeyDoc(b, tbl, headerKey)
		b = append(b, '}')
	}
	b = append(b, `,"value":`...)
	if e.o.Schemas {
		b = append(b, `{"payload":`...)
	}
	b = append(b, `{"before":`...)
	b = appendOrNull(b, before)
	b = append(b, `,"after":`...)
	b = appendOrNull(b, after)
	e.finishEvent(b, ev, tbl, op)
}

// finishEvent appends the event's op and transaction block to its bytes
// b (appended to e.buf) and notes where it ends and its tail.
func (e *txnEncoder) finishEvent(b []byte, ev *event.Event, tbl *table, op string) {
	b = append(b, `,"op":"`...)
	b = append(b, op...)
	b = append(b, `","transaction":`...)
	inTxn := ev.Op != event.OpSnapshot && !e.t.Chunked
	if inTxn {
		// Copy rows have no transaction block, as Debezium's snapshot
		// events; nor do the pieces of a transaction delivered in pieces,
		// whose order in it is not known here.
		e.total++
		b = append(b, `{"total_order":`...)
		b = strconv.AppendInt(b, e.total, 10)
		b = append(b, `,"data_collection_order":`...)
		b = strconv.AppendInt(b, e.nextOrder(tbl), 10)
		b = append(b, `,"id":`...)
	} else {
		b = append(b, "null"...)
	}
	var tail []byte
	if e.ownTxnPart {
		// A small transaction with schemas: its part is written into
		// the event, and the tail is the table's schema, shared by the
		// events of every transaction instead of copied into each.
		b = e.appendTxnPart(b, ev, tbl, inTxn)
		tail = schemaTail(tbl)
	} else {
		tail = e.tail(ev, tbl, inTxn)
	}
	e.buf = b
	e.ends = append(e.ends, len(b))
	e.tails = append(e.tails, tail)
}

// nextOrder counts an event of tbl and returns its data_collection_order.
// A transaction's events are of a table or two: a short list is searched
// faster than a map is hashed. Events without a schema (nil) are counted
// together.
func (e *txnEncoder) nextOrder(tbl *table) int64 {
	for i := range e.orders {
		if e.orders[i].tbl == tbl {
			e.orders[i].n++
			return e.orders[i].n
		}
	}
	e.orders = append(e.orders, tableOrder{tbl, 1})
	return 1
}

type tableOrder struct {
	tbl *table
	n   int64
}

// tailKey is what makes two events' tails differ.
type tailKey struct {
	tbl      *table
	shard    string
	snapshot bool
	inTxn    bool
}

// builtTail is a tail made for the transaction, and what made it.
type builtTail struct {
	key  tailKey
	tail []byte
}

// tail returns the shared end of an event (see appendEvent), built once
// per transaction, table, shard and kind of row.
func (e *txnEncoder) tail(ev *event.Event, tbl *table, inTxn bool) []byte {
	k := tailKey{tbl, ev.Shard, ev.Op == event.OpSnapshot, inTxn}
	for i := len(e.built) - 1; i >= 0; i-- {
		if e.built[i].key == k {
			return e.built[i].tail
		}
	}
	b := e.appendTxnPart(e.tailBuf[:0], ev, tbl, inTxn)
	if e.o.Schemas {
		b = append(b, schemaTail(tbl)...)
	}
	e.tailBuf = b
	t := e.slab.Copy(b)
	e.built = append(e.built, builtTail{k, t})
	return t
}

// appendTxnPart appends what an event's tail holds of its transaction:
// the end of the transaction block (its id), ts_ms and the source block,
// and the value document's closing brace.
func (e *txnEncoder) appendTxnPart(b []byte, ev *event.Event, tbl *table, inTxn bool) []byte {
	if inTxn {
		b = append(b, e.vgtid...)
		b = append(b, '}')
	}
	b = append(b, `,"ts_ms":`...)
	b = strconv.AppendInt(b, e.tsMS, 10)
	b = e.appendSource(b, ev, tbl)
	return append(b, '}')
}

// schemaTail ends an event's value document with schemas.
func schemaTail(tbl *table) []byte {
	if tbl == nil {
		return nullSchemaTail
	}
	return tbl.schemaTail
}

var nullSchemaTail = []byte(`,"schema":null}`)

func appendOrNull(b, v []byte) []byte {
	if v == nil {
		return append(b, "null"...)
	}
	return append(b, v...)
}

// appendKeyDoc writes a key: its payload, or with schemas its document.
func (e *txnEncoder) appendKeyDoc(b []byte, tbl *table, key []byte) []byte {
	if !e.o.Schemas {
		return appendOrNull(b, key)
	}
	if key == nil {
		return append(b, `{"payload":null,"schema":null}`...)
	}
	b = append(b, `{"payload":`...)
	b = append(b, key...)
	b = append(b, `,"schema":`...)
	b = append(b, tbl.keySchema...)
	return append(b, '}')
}

func (e *txnEncoder) appendSource(b []byte, ev *event.Event, tbl *table) []byte {
	b = append(b, e.head(ev.Op == event.OpSnapshot)...)
	if tbl != nil {
		b = append(b, tbl.sourceTable...)
	} else {
		b = appendString(b, ev.Keyspace)
		b = append(b, `,"table":`...)
		b = appendString(b, ev.Table)
		b = append(b, `,"shard":`...)
	}
	b = appendString(b, ev.Shard)
	b = append(b, `,"vgtid":`...)
	b = append(b, e.vgtid...)
	return append(b, '}')
}
