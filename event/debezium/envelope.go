package debezium

import (
	"strconv"

	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"

	"github.com/vstream-gateway/vstream-gateway/event"
)

// vgtidJSON is a position as the connector writes it:
// [{"keyspace":"…","shard":"…","gtid":"…"},…].
func vgtidJSON(b []byte, v *binlogdatapb.VGtid) []byte {
	b = append(b, '[')
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

// appendEvent appends one event without its closing brace. key is the
// re-encoded key (nil: null); header, when set, names headerKey in a
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
	b = appendOrNull(b, before)
	b = append(b, `,"after":`...)
	b = appendOrNull(b, after)
	b = e.appendSource(b, ev, tbl)
	b = append(b, `,"op":"`...)
	b = append(b, op...)
	b = append(b, `","ts_ms":`...)
	b = strconv.AppendInt(b, e.tsMS, 10)
	b = append(b, `,"transaction":`...)
	b = e.appendTransaction(b, ev, tbl)
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
		return append(b, `{"schema":null,"payload":null}`...)
	}
	b = append(b, `{"schema":`...)
	b = append(b, tbl.keySchema...)
	b = append(b, `,"payload":`...)
	b = append(b, key...)
	return append(b, '}')
}

func (e *txnEncoder) appendSource(b []byte, ev *event.Event, tbl *table) []byte {
	if ev.Op == event.OpSnapshot {
		b = append(b, e.sourceHead[1]...)
	} else {
		b = append(b, e.sourceHead[0]...)
	}
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

// appendTransaction writes the transaction block: null for copy rows
// (Debezium's snapshot events have none) and for pieces of a chunked
// transaction.
func (e *txnEncoder) appendTransaction(b []byte, ev *event.Event, tbl *table) []byte {
	if ev.Op == event.OpSnapshot || e.t.Chunked {
		return append(b, "null"...)
	}
	e.total++
	if e.orders == nil {
		e.orders = make(map[*table]int64, 1)
	}
	e.orders[tbl]++ // nil for events without a schema: counted together
	b = append(b, `{"id":`...)
	b = append(b, e.vgtid...)
	b = append(b, `,"total_order":`...)
	b = strconv.AppendInt(b, e.total, 10)
	b = append(b, `,"data_collection_order":`...)
	b = strconv.AppendInt(b, e.orders[tbl], 10)
	return append(b, '}')
}
