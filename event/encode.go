package event

import (
	"strconv"
	"sync"

	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"
	querypb "vitess.io/vitess/go/vt/proto/query"
)

// Encode encodes one row change as a change event:
//
//	{"type":"change","op":"update","keyspace":"customer","shard":"-80",
//	 "table":"customer","key":{"customer_id":5},"before":{…},"after":{…},
//	 "commit_ts":"2026-12-02T15:01:02Z"
//
// without the closing brace (see Event). op says which images are used:
// insert and snapshot need rc.After, delete needs rc.Before, update needs
// both; an image the op does not use is ignored and written as null. key
// holds the primary-key columns of the after image (of the before image
// for a delete), or is null when the table has no primary key. OpSnapshot
// marks a row read by the copy phase: its values are parsed in the copy
// phase's spelling. commitTS is the event's timestamp in unix seconds; 0
// (copy-phase rows) gives "commit_ts":null.
//
// Event.JSON is a fresh allocation of exactly the event's size, the only
// allocation Encode makes. Errors are *RowError.
func (t *Table) Encode(op Op, rc *binlogdatapb.RowChange, commitTS int64) (Event, error) {
	return t.EncodeIn(nil, op, rc, commitTS)
}

// EncodeIn is Encode with the event's JSON taken from slab (nil: an
// allocation of its own).
func (t *Table) EncodeIn(slab *Slab, op Op, rc *binlogdatapb.RowChange, commitTS int64) (Event, error) {
	bp := scratchPool.Get().(*[]byte)
	buf, err := t.AppendChange((*bp)[:0], op, rc, commitTS)
	var out []byte
	if err == nil {
		out = slab.Copy(buf)
	}
	if cap(buf) <= maxPooledScratch {
		*bp = buf
		scratchPool.Put(bp)
	}
	if err != nil {
		return Event{}, err
	}
	return Event{
		Type:     TypeChange,
		Op:       op,
		Keyspace: t.keyspace,
		Shard:    t.shard,
		Table:    t.name,
		JSON:     out,
		Schema:   t.schema,
	}, nil
}

// Slab hands out event bodies from shared blocks: one allocation per
// 64 KiB of events instead of one per row, which is most of what the
// garbage collector has to do on a busy stream. A block stays alive while
// any event cut from it does, so a slab suits events that live and die
// together (a transaction, a read-ahead buffer). Not safe for concurrent
// use.
type Slab struct {
	block []byte
}

const (
	slabBlock = 64 << 10
	// slabMax: bigger bodies get an allocation of their own, so that one
	// wide row does not waste most of a block.
	slabMax = slabBlock / 8
)

// Copy returns a copy of b whose capacity ends with it (appending to it
// never touches the next event). A nil Slab allocates.
func (s *Slab) Copy(b []byte) []byte {
	if s == nil || len(b) > slabMax {
		out := make([]byte, len(b))
		copy(out, b)
		return out
	}
	if cap(s.block)-len(s.block) < len(b) {
		s.block = make([]byte, 0, slabBlock)
	}
	n := len(s.block)
	s.block = append(s.block, b...)
	return s.block[n:len(s.block):len(s.block)]
}

// scratchPool holds encoding buffers, so that Encode can write into a warm
// buffer and then allocate the event at its exact size.
var scratchPool = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// maxPooledScratch keeps a rare huge row (a LONGBLOB) from pinning its
// buffer in the pool.
const maxPooledScratch = 1 << 20

// AppendChange appends what Encode would put in Event.JSON to dst. On
// error dst is returned with its original length.
func (t *Table) AppendChange(dst []byte, op Op, rc *binlogdatapb.RowChange, commitTS int64) ([]byte, error) {
	opi := opIndex(op)
	if opi < 0 {
		return dst, t.rowError(op, "", -1, nil, "unknown op")
	}
	if rc == nil {
		return dst, t.rowError(op, "", -1, nil, "nil row change")
	}
	var before, after *querypb.Row
	switch op {
	case OpInsert, OpSnapshot:
		after = rc.After
	case OpUpdate:
		before, after = rc.Before, rc.After
		if before == nil {
			return dst, t.rowError(op, "", -1, nil, "update without before image")
		}
	case OpDelete:
		before = rc.Before
	}
	keyRow, keyImage := after, "after"
	if op == OpDelete {
		keyRow, keyImage = before, "before"
	}
	if keyRow == nil {
		return dst, t.rowError(op, "", -1, nil, op2image(op)+" image missing")
	}
	copyPhase := op == OpSnapshot

	start := len(dst)
	dst = append(dst, t.prefix[opi]...)
	var err error
	if dst, err = t.appendKey(dst, keyRow, copyPhase); err != nil {
		return dst[:start], t.imageError(err, op, keyImage)
	}
	dst = append(dst, `,"before":`...)
	if dst, err = t.appendImage(dst, before, copyPhase); err != nil {
		return dst[:start], t.imageError(err, op, "before")
	}
	dst = append(dst, `,"after":`...)
	if dst, err = t.appendImage(dst, after, copyPhase); err != nil {
		return dst[:start], t.imageError(err, op, "after")
	}
	dst = append(dst, `,"commit_ts":`...)
	return appendCommitTS(dst, commitTS), nil
}

func op2image(op Op) string {
	if op == OpDelete {
		return "before"
	}
	return "after"
}

// AppendRow appends one row image as a JSON object {"col":value,…}, for
// callers that build other envelopes. copyPhase is true for rows read by
// the copy phase. Errors are *RowError.
func (t *Table) AppendRow(dst []byte, row *querypb.Row, copyPhase bool) ([]byte, error) {
	start := len(dst)
	out, err := t.appendRow(dst, row, copyPhase)
	if err != nil {
		return dst[:start], t.imageError(err, "", "")
	}
	return out, nil
}

// ChangeOp derives the op of a binlog row change from the images it
// carries: after only → insert, before only → delete, both → update.
func ChangeOp(rc *binlogdatapb.RowChange) (Op, bool) {
	switch {
	case rc == nil:
		return "", false
	case rc.Before != nil && rc.After != nil:
		return OpUpdate, true
	case rc.After != nil:
		return OpInsert, true
	case rc.Before != nil:
		return OpDelete, true
	}
	return "", false
}

func (t *Table) appendImage(dst []byte, row *querypb.Row, copyPhase bool) ([]byte, error) {
	if row == nil {
		return append(dst, "null"...), nil
	}
	return t.appendRow(dst, row, copyPhase)
}

// columnError locates a failure inside a row.
type columnError struct {
	col    int
	value  []byte
	reason string
}

func (e *columnError) Error() string { return e.reason }

func (t *Table) appendRow(dst []byte, row *querypb.Row, copyPhase bool) ([]byte, error) {
	if len(row.Lengths) != len(t.cols) {
		return dst, &columnError{col: -1, reason: "row has " + strconv.Itoa(len(row.Lengths)) +
			" values, FIELD event has " + strconv.Itoa(len(t.cols)) + " columns"}
	}
	values := row.Values
	dst = append(dst, '{')
	off := int64(0)
	for i := range t.cols {
		c := &t.cols[i]
		dst = append(dst, c.member...)
		l := row.Lengths[i]
		if l < 0 {
			if l != -1 {
				return dst, &columnError{col: i, reason: "negative length " + strconv.Itoa(int(l))}
			}
			dst = append(dst, "null"...)
			continue
		}
		if l > int64(len(values))-off {
			return dst, &columnError{col: i, reason: "length overruns the row's values"}
		}
		v := values[off : off+l]
		off += l
		var err error
		if dst, err = c.enc(dst, v, copyPhase); err != nil {
			return dst, &columnError{col: i, value: v, reason: err.Error()}
		}
	}
	if off != int64(len(values)) {
		return dst, &columnError{col: -1, reason: "row has " + strconv.Itoa(len(values)-int(off)) + " bytes past its last value"}
	}
	return append(dst, '}'), nil
}

// appendKey writes the primary-key columns of row as an object, or null.
func (t *Table) appendKey(dst []byte, row *querypb.Row, copyPhase bool) ([]byte, error) {
	if t.lastPK < 0 {
		return append(dst, "null"...), nil
	}
	if len(row.Lengths) != len(t.cols) {
		return dst, &columnError{col: -1, reason: "row has " + strconv.Itoa(len(row.Lengths)) +
			" values, FIELD event has " + strconv.Itoa(len(t.cols)) + " columns"}
	}
	dst = append(dst, '{')
	first := true
	off := int64(0)
	for i := 0; i <= t.lastPK; i++ {
		l := row.Lengths[i]
		var v []byte
		if l >= 0 {
			if l > int64(len(row.Values))-off {
				return dst, &columnError{col: i, reason: "length overruns the row's values"}
			}
			v = row.Values[off : off+l]
			off += l
		}
		c := &t.cols[i]
		if !c.pk {
			continue
		}
		member := c.member
		if member[0] == ',' {
			member = member[1:]
		}
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = append(dst, member...)
		if l < 0 {
			// A primary key is never NULL; keep the event well-formed
			// anyway and let appendRow judge the length.
			dst = append(dst, "null"...)
			continue
		}
		var err error
		if dst, err = c.enc(dst, v, copyPhase); err != nil {
			return dst, &columnError{col: i, value: v, reason: err.Error()}
		}
	}
	return append(dst, '}'), nil
}

func (t *Table) rowError(op Op, image string, col int, v []byte, reason string) *RowError {
	e := &RowError{Keyspace: t.keyspace, Shard: t.shard, Table: t.name, Op: op, Image: image, Reason: reason}
	if col >= 0 {
		e.Column = t.cols[col].name
	}
	if v != nil {
		e.Value = errorValue(v)
	}
	return e
}

func (t *Table) imageError(err error, op Op, image string) error {
	if ce, ok := err.(*columnError); ok {
		return t.rowError(op, image, ce.col, ce.value, ce.reason)
	}
	return t.rowError(op, image, -1, nil, err.Error())
}
