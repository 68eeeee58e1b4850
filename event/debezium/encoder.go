package debezium

import (
	"bytes"
	"strconv"
	"sync"

	"github.com/vstream-gateway/vstream-gateway/event"
)

// txnEncoder holds what every event of one transaction shares.
type txnEncoder struct {
	t    Txn
	o    Options
	slab *event.Slab // where the events' bytes and tails end up
	buf  []byte
	// ends is where each event's own bytes end in buf, -1 for a control
	// event passed through; tails are their tails (event.Event.Tail).
	ends  []int
	tails [][]byte
	// built are the tails made for the transaction: a few (tables and
	// shards), searched in a short list faster than a map is hashed, the
	// last one first: a transaction's events are mostly of one table and
	// shard.
	built   []builtTail
	tailBuf []byte // where tails are built
	// ownTxnPart: each event holds its transaction's part of the tail
	// (appendTxnPart) in its own bytes, and the tail is the table's
	// schema alone (schemaTail). For small transactions with schemas,
	// where the schema is most of an event and would otherwise be copied
	// into each transaction's tail.
	ownTxnPart bool
	// vgtid is source.vgtid and transaction.id (vgtidString).
	vgtid []byte
	// sourceHead is the source block up to its keyspace, for change rows
	// ([0]) and copy rows ([1]), made when a row of the kind first needs
	// it (head).
	sourceHead [2][]byte
	headMade   [2]bool
	commitMS   int64
	tsMS       int64
	total      int64
	orders     []tableOrder // data_collection_order per table
	parts      [2]event.Op
	// scratch holds an event's re-encoded images and keys until the
	// event is written.
	scratch []byte
	keyBuf  []byte
	// The table of the last event's schema: a transaction's events are
	// mostly of one table.
	lastSchema *event.Schema
	lastTable  *table
	schemaKey  string
}

func newTxnEncoder(t Txn, o Options) *txnEncoder {
	e := encoders.Get().(*txnEncoder)
	e.t, e.o, e.tsMS = t, o, t.Received.UnixMilli()
	e.slab = slabs.Get().(*event.Slab)
	e.total, e.lastSchema, e.lastTable = 0, nil, nil
	e.orders, e.built, e.headMade = e.orders[:0], e.built[:0], [2]bool{}
	e.buf, e.ends, e.tails, e.scratch = e.buf[:0], e.ends[:0], e.tails[:0], e.scratch[:0]
	if e.schemaKey != "debezium:"+o.Stream {
		e.schemaKey = "debezium:" + o.Stream
	}
	e.ownTxnPart = o.Schemas && len(t.Events) <= ownTxnPartMax
	e.vgtid = vgtidString(e.vgtid[:0], t.VGtid)
	e.commitMS = t.CommitTS * 1000
	if e.commitMS == 0 {
		e.commitMS = e.tsMS // copy rows: when they were read
	}
	return e
}

// ownTxnPartMax is the largest transaction whose events each hold their
// transaction's part of the tail when schemas are on: past it, writing
// that part into every event costs more than copying the schema once
// into a shared tail (BenchmarkFormatRatio, a 7-column table: even at 5
// rows, better at 4, worse at 10).
const ownTxnPartMax = 4

// head is the source block up to its keyspace for a change row or, with
// snapshot, a copy row.
func (e *txnEncoder) head(snapshot bool) []byte {
	i, flag := 0, "false"
	if snapshot {
		i, flag = 1, "true"
	}
	if !e.headMade[i] {
		b := append(e.sourceHead[i][:0], `,"source":{"version":"`+Version+`","connector":"vitess","name":`...)
		b = appendString(b, e.o.Stream)
		b = append(b, `,"ts_ms":`...)
		b = strconv.AppendInt(b, e.commitMS, 10)
		b = append(b, `,"snapshot":"`...)
		b = append(b, flag...)
		b = append(b, `","db":"","sequence":null,"keyspace":`...)
		e.sourceHead[i], e.headMade[i] = b, true
	}
	return e.sourceHead[i]
}

// encoders recycles encoders with their buffers: a transaction's events
// are written into them, then copied out at their final size (finish).
var encoders = sync.Pool{New: func() any { return &txnEncoder{buf: make([]byte, 0, 64<<10)} }}

// slabs hold the blocks the encoded events are copied into. A block is
// shared by the events of several transactions, and lives as long as one
// of them does, as the default format's blocks (event.Slab).
var slabs = sync.Pool{New: func() any { return new(event.Slab) }}

// release returns e to the pool, unless a huge transaction grew it.
func (e *txnEncoder) release() {
	slabs.Put(e.slab)
	e.slab = nil
	if cap(e.buf) > maxScratch || cap(e.scratch) > maxScratch || cap(e.tailBuf) > maxScratch {
		return
	}
	// Nothing of the transaction stays reachable from the pool.
	e.t = Txn{}
	clear(e.tails)
	clear(e.built)
	clear(e.orders)
	e.lastSchema, e.lastTable = nil, nil
	encoders.Put(e)
}

// tableOf is the encoder's view of an event's table (nil: the event has
// no schema, and its values are passed through).
func (e *txnEncoder) tableOf(ev *event.Event) *table {
	if ev.Schema == nil {
		return nil
	}
	if ev.Schema != e.lastSchema {
		e.lastSchema = ev.Schema
		e.lastTable = ev.Schema.Derived(e.schemaKey, func() any { return compile(ev.Schema, e.o.Stream) }).(*table)
	}
	return e.lastTable
}

// rowImages is one change event's images and keys, re-encoded: spans of
// txnEncoder.scratch (start, end; a null image or key has start < 0).
type rowImages struct {
	before, after, beforeKey, afterKey [2]int
}

func (e *txnEncoder) span(s [2]int) []byte {
	if s[0] < 0 {
		return nil
	}
	return e.scratch[s[0]:s[1]]
}

// change appends the Debezium event(s) of one change event to e.buf and
// returns their ops.
func (e *txnEncoder) change(ev *event.Event) []event.Op {
	tbl := e.tableOf(ev)
	if tbl != nil && e.direct(ev, tbl) {
		e.parts[0] = ev.Op
		return e.parts[:1]
	}
	im, ok := e.images(ev, tbl)
	if !ok {
		// Not the gateway's own encoding (it always is): pass the event
		// on as it is rather than lose it.
		e.buf = append(e.buf, ev.JSON...)
		e.ends = append(e.ends, len(e.buf))
		e.tails = append(e.tails, ev.Tail)
		e.parts[0] = ev.Op
		return e.parts[:1]
	}
	before, after := e.span(im.before), e.span(im.after)
	oldKey, newKey := e.span(im.beforeKey), e.span(im.afterKey)
	if ev.Op == event.OpUpdate && oldKey != nil && newKey != nil && string(oldKey) != string(newKey) {
		// The connector's primary-key update: a delete of the old key,
		// then a create of the new one, each naming the other.
		e.appendEvent(ev, tbl, "d", before, nil, oldKey, "__debezium.newkey", newKey)
		e.appendEvent(ev, tbl, "c", nil, after, newKey, "__debezium.oldkey", oldKey)
		e.parts = [2]event.Op{event.OpDelete, event.OpInsert}
		return e.parts[:]
	}
	key := newKey
	if ev.Op == event.OpDelete {
		key = oldKey
	}
	e.appendEvent(ev, tbl, opCode(ev.Op), before, after, key, "", nil)
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

// images finds the before and after images in a change event's bytes
// ({"type":…,"op":…,"keyspace":…,"shard":…,"table":…,"key":…,"before":B,
// "after":A,"commit_ts":… without its closing brace) and re-encodes them
// into e.scratch, each with its primary key, in one pass over each.
func (e *txnEncoder) images(ev *event.Event, tbl *table) (rowImages, bool) {
	j := ev.JSON
	e.scratch = e.scratch[:0]
	var im rowImages
	k := keyAt(ev)
	if k < 0 {
		return im, false
	}
	i := skipValue(j, k+len(keyMember))
	if i < 0 || !bytes.HasPrefix(j[i:], beforeMember) {
		return im, false
	}
	i += len(beforeMember)
	var ok bool
	if im.before, im.beforeKey, i, ok = e.image(tbl, j, i); !ok {
		return im, false
	}
	if !bytes.HasPrefix(j[i:], afterMember) {
		return im, false
	}
	im.after, im.afterKey, _, ok = e.image(tbl, j, i+len(afterMember))
	return im, ok
}

// keyAt is where the key member (`,"key":`) starts in a change event's
// bytes, -1 if nowhere. The default format writes the members before it
// as {"type":"change","op":OP,"keyspace":K,"shard":S,"table":T: where
// those strings need no escapes, the member is at a known offset;
// otherwise the first `,"key":` is the member itself, as the strings
// before it have their quotes escaped.
func keyAt(ev *event.Event) int {
	j := ev.JSON
	k := len(`{"type":"change","op":"","keyspace":"","shard":"","table":""`) +
		len(ev.Op) + len(ev.Keyspace) + len(ev.Shard) + len(ev.Table)
	// The table member must end there too: then the key member is the one.
	t := k - len(ev.Table) - len(`,"table":""`)
	if t > 0 && k+len(keyMember) <= len(j) && string(j[k:k+len(keyMember)]) == string(keyMember) &&
		string(j[t:t+len(`,"table":"`)]) == `,"table":"` && string(j[k-len(ev.Table)-1:k-1]) == ev.Table && j[k-1] == '"' {
		return k
	}
	return bytes.Index(j, keyMember)
}

var (
	keyMember    = []byte(`,"key":`)
	beforeMember = []byte(`,"before":`)
	afterMember  = []byte(`,"after":`)
)

// image re-encodes the image at j[i:] into e.scratch and its key after it,
// and returns their spans and where the image ends in j.
func (e *txnEncoder) image(tbl *table, j []byte, i int) (img, key [2]int, end int, ok bool) {
	img, key = [2]int{-1, -1}, [2]int{-1, -1}
	if i < len(j) && j[i] == 'n' {
		return img, key, i + len("null"), true
	}
	if tbl == nil {
		end = skipValue(j, i)
		if end < 0 {
			return img, key, end, false
		}
		start := len(e.scratch)
		e.scratch = append(e.scratch, j[i:end]...)
		return [2]int{start, len(e.scratch)}, key, end, true
	}
	start := len(e.scratch)
	var keyBuf []byte
	if tbl.hasPK {
		keyBuf = e.keyBuf[:0]
		if keyBuf == nil {
			keyBuf = make([]byte, 0, 64)
		}
	}
	e.scratch, keyBuf, end, ok = tbl.transcode(e.scratch, keyBuf, j, i)
	if !ok {
		return img, key, end, false
	}
	img = [2]int{start, len(e.scratch)}
	if keyBuf != nil {
		e.scratch = append(e.scratch, keyBuf...)
		key = [2]int{img[1], len(e.scratch)}
		e.keyBuf = keyBuf
	}
	return img, key, end, true
}

// direct writes a change event's Debezium event in one pass over its
// bytes: the default format's key member re-encoded as the key, the images
// re-encoded in place. It declines (writing nothing) what it cannot do so:
// an update that changes the primary key (two events), or bytes not laid
// out as the gateway writes them; change then takes the general way.
func (e *txnEncoder) direct(ev *event.Event, tbl *table) bool {
	j := ev.JSON
	k := keyAt(ev)
	if k < 0 {
		return false
	}
	i := k + len(keyMember)
	b := append(e.buf, `{"type":"change","key":`...)
	if e.o.Schemas {
		b = append(b, `{"payload":`...)
	}
	keyStart := len(b)
	var ok bool
	if i < len(j) && j[i] == 'n' {
		b, i = append(b, "null"...), i+len("null")
	} else if b, _, i, ok = tbl.transcode(b, nil, j, i); !ok {
		return false
	}
	keyEnd := len(b)
	if e.o.Schemas {
		b = append(b, `,"schema":`...)
		if string(b[keyStart:keyEnd]) == "null" {
			b = append(b, "null"...)
		} else {
			b = append(b, tbl.keySchema...)
		}
		b = append(b, '}')
	}
	if !bytes.HasPrefix(j[i:], beforeMember) {
		return false
	}
	i += len(beforeMember)
	b = append(b, `,"value":`...)
	if e.o.Schemas {
		b = append(b, `{"payload":`...)
	}
	b = append(b, `{"before":`...)
	// An update's before image yields the old key, to compare with the
	// new one: a change of primary key is two events.
	var oldKey []byte
	if ev.Op == event.OpUpdate && tbl.hasPK {
		oldKey = e.keyBuf[:0]
		if oldKey == nil {
			oldKey = make([]byte, 0, 64)
		}
	}
	if i < len(j) && j[i] == 'n' {
		b, i = append(b, "null"...), i+len("null")
	} else if b, oldKey, i, ok = tbl.transcode(b, oldKey, j, i); !ok {
		return false
	}
	e.keyBuf = oldKey
	if oldKey != nil && string(oldKey) != string(b[keyStart:keyEnd]) {
		return false
	}
	if !bytes.HasPrefix(j[i:], afterMember) {
		return false
	}
	i += len(afterMember)
	b = append(b, `,"after":`...)
	if i < len(j) && j[i] == 'n' {
		b = append(b, "null"...)
	} else if b, _, _, ok = tbl.transcode(b, nil, j, i); !ok {
		return false
	}
	e.finishEvent(b, ev, tbl, opCode(ev.Op))
	return true
}
