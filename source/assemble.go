package source

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"

	"github.com/vstream-gateway/vstream-gateway/event"
	"github.com/vstream-gateway/vstream-gateway/position"
)

// assembler turns the VEvents of one VStream into Txns. It is not safe for
// concurrent use; each reader attempt owns one.
type assembler struct {
	spec    Spec
	schema  *schemaCache
	tables  map[string]*event.Table // by shard + "/" + table
	keys    map[string]*keyColumns  // primary keys, by shard + "/" + table
	cur     *Txn
	pos     *binlogdatapb.VGtid // position of the last emitted Txn
	journal map[int64]bool      // journal ids already announced
	// parts records, per journal id, the participants whose JOURNAL came.
	parts map[int64]map[string]bool
	// held maps "keyspace/shard" of each participant whose JOURNAL came to
	// the position just before it (the journal's local_position), until
	// vtgate continues on the targets; see hold.
	held map[string]string
	hook JournalHook
	// slab holds the encoded rows: they live together in a transaction
	// and then in the read-ahead buffer.
	slab event.Slab
	// lastRows sizes the next transaction's events: consecutive
	// transactions tend to be alike, and growing a slice of 1,000 events
	// one ROW event at a time copies it over and over.
	lastRows int
	// chunk is the size in encoded bytes past which the transaction being
	// read is handed out in pieces (DESIGN §3.1); curBytes is what the
	// current piece holds.
	chunk, curBytes int
	// skip is how many events of the first transaction were delivered
	// already (the attempt resumes a chunked transaction that an earlier
	// attempt handed out in part): they are dropped, and that
	// transaction's first piece is marked Continued.
	skip   int
	resume bool
	// copy holds the copy phase's positions (see holdCopy); nil when the
	// stream was not opened in one, or once it ended.
	copy *copyHold
	// raw is vtgate's last position, as it sent it (pos is what was
	// handed out, held at journals, during a copy, and stamped).
	raw *binlogdatapb.VGtid
	// inc is each shard's incarnation for this stream, by
	// "keyspace/shard"; incarnations answers for shards not there
	// (incarnation.go), looked keeps its answers per keyspace.
	inc          map[string]string
	incarnations Incarnations
	looked       map[string]func(string) string
	// err is a stamping failure in emit: add returns it.
	err error
	ctx context.Context
}

func newAssembler(spec Spec, schema *schemaCache, pos *binlogdatapb.VGtid, hook JournalHook, chunk, skip int) *assembler {
	return &assembler{
		chunk:   chunk,
		skip:    skip,
		resume:  skip > 0,
		hook:    hook,
		spec:    spec,
		schema:  schema,
		tables:  map[string]*event.Table{},
		keys:    map[string]*keyColumns{},
		pos:     pos,
		journal: map[int64]bool{},
		parts:   map[int64]map[string]bool{},
		copy:    newCopyHold(pos),
		inc:     position.Of(pos).Incarnations(),
	}
}

// ProtocolError is an event sequence the gateway cannot interpret (for
// example a ROW before its FIELD). The reader reconnects from the last
// whole transaction, which makes vtgate resend FIELD events.
type ProtocolError struct{ Msg string }

func (e *ProtocolError) Error() string { return "source: unexpected VStream sequence: " + e.Msg }

// add consumes one event and returns a finished Txn, if any.
func (a *assembler) add(ctx context.Context, ev *binlogdatapb.VEvent) (*Txn, error) {
	a.ctx = ctx
	t, err := a.step(ctx, ev)
	if a.err != nil {
		return nil, a.err
	}
	return t, err
}

// step dispatches one event by its type. It runs for every event of every
// stream: its cases are direct method calls on a, which cost no allocation
// and no indirection.
func (a *assembler) step(ctx context.Context, ev *binlogdatapb.VEvent) (*Txn, error) {
	switch ev.Type {
	case binlogdatapb.VEventType_BEGIN:
		a.begin(ev)
	case binlogdatapb.VEventType_FIELD:
		return nil, a.field(ctx, ev)
	case binlogdatapb.VEventType_ROW:
		if err := a.row(ev); err != nil {
			return nil, err
		}
		return a.piece(), nil
	case binlogdatapb.VEventType_VGTID:
		return a.vgtid(ev), nil
	case binlogdatapb.VEventType_COMMIT:
		return a.commit(), nil
	case binlogdatapb.VEventType_ROLLBACK:
		a.cur = nil
	case binlogdatapb.VEventType_DDL:
		return a.ddl(ev), nil
	case binlogdatapb.VEventType_JOURNAL:
		return a.participantJournal(ctx, ev)
	case binlogdatapb.VEventType_COPY_COMPLETED:
		return a.copyCompleted(ev), nil
	case binlogdatapb.VEventType_HEARTBEAT:
		return a.heartbeat(), nil
	}
	return nil, nil
}

// begin starts the current transaction.
func (a *assembler) begin(ev *binlogdatapb.VEvent) {
	a.cur = &Txn{CommitTS: ev.Timestamp, Continued: a.resume}
	a.resume, a.curBytes = false, 0
	if a.lastRows > 0 {
		a.cur.Events = make([]event.Event, 0, min(a.lastRows, 1024))
	}
}

// vgtid records vtgate's position: the current transaction's, or, outside
// one, a Txn of its own.
func (a *assembler) vgtid(ev *binlogdatapb.VEvent) *Txn {
	a.raw = ev.Vgtid
	if a.cur != nil {
		a.cur.VGtid = ev.Vgtid
		return nil
	}
	// A position outside a transaction (stream start, before DDL or
	// OTHER events): hand it out so idle cursors still advance.
	return a.emit(&Txn{VGtid: ev.Vgtid})
}

// commit ends the current transaction and hands out what is left of it.
func (a *assembler) commit() *Txn {
	t := a.cur
	a.cur = nil
	if t == nil {
		return nil
	}
	if t.VGtid == nil {
		t.VGtid = a.pos
	}
	a.lastRows = len(t.Events)
	if t = a.trim(t); t == nil {
		return nil
	}
	return a.emit(t)
}

// ddl forgets the keyspace's schema and hands out a DDL control event.
func (a *assembler) ddl(ev *binlogdatapb.VEvent) *Txn {
	a.schema.invalidate(a.spec.Keyspace)
	ctl := event.Control(event.TypeDDL, ev.Keyspace, ev.Shard, map[string]any{"statement": ev.Statement})
	return a.emit(&Txn{Events: []event.Event{ctl}, CommitTS: ev.Timestamp})
}

// participantJournal records a participant's JOURNAL (and, for a reshard, holds its
// position; see hold), tells the hook, and announces the cutover.
func (a *assembler) participantJournal(ctx context.Context, ev *binlogdatapb.VEvent) (*Txn, error) {
	keyspace := ev.Keyspace
	if keyspace == "" {
		keyspace = a.spec.Keyspace
	}
	if j := ev.Journal; j != nil {
		if a.parts[j.Id] == nil {
			a.parts[j.Id] = map[string]bool{}
		}
		a.parts[j.Id][ev.Shard] = true
		if j.MigrationType == binlogdatapb.MigrationType_SHARDS {
			a.holdAt(keyspace, ev.Shard, j.LocalPosition)
		}
	}
	if a.hook != nil && ev.Journal != nil {
		a.hook(ctx, keyspace, ev.Shard, ev.Journal)
	}
	j, err := a.stampJournal(ctx, keyspace, ev.Shard, ev.Journal)
	if err != nil {
		return nil, err
	}
	return a.journalEvent(j), nil
}

// copyCompleted ends a shard's copy phase, or, for the final one, the
// stream's.
func (a *assembler) copyCompleted(ev *binlogdatapb.VEvent) *Txn {
	// vtgate sends one per shard and a final one with neither keyspace
	// nor shard once every shard finished copying.
	if ev.Keyspace == "" && ev.Shard == "" {
		// The copy is over: from here on vtgate's positions are
		// the stream's, this one first.
		a.copy = nil
		ctl := event.Control(event.TypeSnapshotComplete, a.spec.Keyspace, "", nil)
		return a.emit(&Txn{Events: []event.Event{ctl}, VGtid: a.raw})
	}
	a.copy.done(ev.Keyspace, ev.Shard)
	return nil
}

// heartbeat hands out a heartbeat at the last position, unless there is
// none yet or a transaction is open.
func (a *assembler) heartbeat() *Txn {
	if a.pos == nil || a.cur != nil {
		return nil
	}
	return &Txn{VGtid: a.pos, Heartbeat: true, Received: time.Now()}
}

func (a *assembler) emit(t *Txn) *Txn {
	if t.VGtid == nil {
		t.VGtid = a.pos
	}
	v, err := a.stamp(a.ctx, a.copy.hold(a.hold(t.VGtid)))
	if err != nil {
		a.err = err
		return nil
	}
	t.VGtid = v
	if t.VGtid == nil {
		// Nothing to resume from yet (events before the first position);
		// drop rather than hand out an event with no cursor.
		return nil
	}
	t.Received = time.Now()
	if len(t.Events) > 0 {
		t.encodings = new(Encodings)
	}
	a.pos = t.VGtid
	return t
}

// Positions at a reshard cutover. A shard that sent its JOURNAL waits in
// vtgate until every other participant sent theirs; meanwhile the others'
// transactions carry a VGTID with that shard past its journal. A stream
// resumed from such a position (after an error, a stall, a disconnect)
// never sees that shard's journal again, so vtgate waits forever for it
// and the stream hangs at the cutover, only heartbeats coming. So every
// position handed out keeps a participant that sent its journal at the
// journal's local_position, the position just before it: resumed there,
// the shard repeats its journal (nothing else: its writes had stopped)
// and the cutover completes. Once vtgate continues on the target shards
// the participants leave the VGTID and the holds go.

// holdAt holds keyspace/shard at local, or, when the journal has no local
// position, at the last position handed out for it (no event of the shard
// came after it but the journal's).
func (a *assembler) holdAt(keyspace, shard, local string) {
	if local == "" && a.pos != nil {
		for _, sg := range a.pos.ShardGtids {
			if sg.Keyspace == keyspace && sg.Shard == shard {
				local = sg.Gtid
			}
		}
	}
	if local == "" {
		return
	}
	if a.held == nil {
		a.held = map[string]string{}
	}
	a.held[keyspace+"/"+shard] = local
}

// hold returns v with every held shard at its held position.
func (a *assembler) hold(v *binlogdatapb.VGtid) *binlogdatapb.VGtid {
	if len(a.held) == 0 || v == nil {
		return v
	}
	out := &binlogdatapb.VGtid{ShardGtids: make([]*binlogdatapb.ShardGtid, len(v.ShardGtids))}
	present := false
	for i, sg := range v.ShardGtids {
		l, ok := a.held[sg.Keyspace+"/"+sg.Shard]
		if !ok {
			out.ShardGtids[i] = sg
			continue
		}
		present = true
		out.ShardGtids[i] = &binlogdatapb.ShardGtid{Keyspace: sg.Keyspace, Shard: sg.Shard, Gtid: l, TablePKs: sg.TablePKs}
	}
	if !present {
		// vtgate went on to the targets: the cutover is behind.
		a.held = nil
		return v
	}
	return out
}

func tableName(name string) string {
	if i := strings.LastIndexByte(name, '.'); i >= 0 {
		return name[i+1:]
	}
	return name
}

func (a *assembler) field(ctx context.Context, ev *binlogdatapb.VEvent) error {
	fe := ev.FieldEvent
	table := tableName(fe.TableName)
	keyspace := fe.Keyspace
	if keyspace == "" {
		keyspace = a.spec.Keyspace
	}
	opts := event.Options{}
	if cols, err := a.schema.jsonColumns(ctx, keyspace, table); err == nil && len(cols) > 0 {
		opts.IsJSON = func(_, column string) bool { return cols[column] }
	}
	t, err := event.NewTable(keyspace, fe.Shard, fe, opts)
	if err != nil {
		return fmt.Errorf("source: table %s: %w", table, err)
	}
	a.tables[fe.Shard+"/"+table] = t
	a.keys[fe.Shard+"/"+table] = keyColumnsOf(fe)
	return nil
}

func (a *assembler) row(ev *binlogdatapb.VEvent) error {
	re := ev.RowEvent
	table := tableName(re.TableName)
	t := a.tables[re.Shard+"/"+table]
	if t == nil {
		return &ProtocolError{Msg: "ROW for " + re.Shard + "/" + table + " before its FIELD event"}
	}
	if a.cur == nil {
		return &ProtocolError{Msg: "ROW outside a transaction"}
	}
	a.cur.Events = slices.Grow(a.cur.Events, len(re.RowChanges))
	for _, rc := range re.RowChanges {
		var op event.Op
		switch {
		case ev.Timestamp == 0 && rc.Before == nil:
			// Copy-phase rows carry no binlog timestamp.
			op = event.OpSnapshot
		case rc.Before == nil:
			op = event.OpInsert
		case rc.After == nil:
			op = event.OpDelete
		default:
			op = event.OpUpdate
		}
		e, err := t.EncodeIn(&a.slab, op, rc, ev.Timestamp)
		if err != nil {
			return err
		}
		if op == event.OpSnapshot {
			e.CopyKey = a.keys[re.Shard+"/"+table].copyKey(rc.After)
		}
		a.cur.Events = append(a.cur.Events, e)
		a.curBytes += len(e.JSON)
	}
	return nil
}

// piece hands out what the current transaction holds once it is past the
// chunk size: a Partial Txn at the position before the transaction, so
// that neither the gateway nor vtgate (TransactionChunkSize) holds a whole
// huge transaction. Copy-phase batches are not cut here (their pieces get
// cursors of their own, hub/split.go), nor a transaction carrying a journal.
func (a *assembler) piece() *Txn {
	c := a.cur
	if a.chunk <= 0 || c == nil || a.curBytes < a.chunk || a.pos == nil || c.Journal != nil ||
		len(c.Events) < 2 || c.Events[0].Op == event.OpSnapshot {
		return nil
	}
	// The newest event stays behind, so that the last piece, the one with
	// the cursor, always has an event to carry it (txn_end, SSE id:).
	n := len(c.Events)
	t := &Txn{Events: c.Events[: n-1 : n-1], CommitTS: c.CommitTS, VGtid: a.pos, Partial: true, Continued: c.Continued, Received: time.Now(), encodings: new(Encodings)}
	last := c.Events[n-1]
	c.Events = append(make([]event.Event, 0, n), last)
	c.Continued, a.curBytes = true, len(last.JSON)
	return a.trim(t)
}

// trim drops the events an earlier attempt delivered already from a
// resumed chunked transaction's pieces; a piece left empty is not
// delivered (the last one is: it carries the position after the
// transaction).
func (a *assembler) trim(t *Txn) *Txn {
	if a.skip == 0 {
		return t
	}
	n := min(a.skip, len(t.Events))
	t.Events = t.Events[n:]
	a.skip -= n
	if t.Partial && len(t.Events) == 0 {
		return nil
	}
	return t
}

// journalEvent announces a reshard cutover once, however many participants
// send its JOURNAL.
func (a *assembler) journalEvent(j *binlogdatapb.Journal) *Txn {
	if j == nil || j.MigrationType != binlogdatapb.MigrationType_SHARDS {
		return nil
	}
	var events []event.Event
	if !a.journal[j.Id] {
		a.journal[j.Id] = true
		var from, to []string
		for _, p := range j.Participants {
			from = append(from, p.Shard)
		}
		for _, sg := range j.ShardGtids {
			to = append(to, sg.Shard)
		}
		// vtgate lists shards in no particular order; key-range order
		// ("-80" < "80-") is what people read.
		sort.Strings(from)
		sort.Strings(to)
		events = append(events, event.Control(event.TypeReshard, a.spec.Keyspace, "", map[string]any{
			"from": from, "to": to, "journal_id": fmt.Sprint(j.Id),
		}))
	}
	done := a.journalDone(j)
	if a.cur != nil {
		a.cur.Journal, a.cur.JournalDone = j, done
		a.cur.Events = append(a.cur.Events, events...)
		return nil
	}
	return a.emit(&Txn{Events: events, Journal: j, JournalDone: done})
}

// journalDone reports whether every participant of j has sent its JOURNAL
// on this stream: the old shards have nothing more to deliver.
func (a *assembler) journalDone(j *binlogdatapb.Journal) bool {
	for _, p := range j.Participants {
		if (p.Keyspace == "" || p.Keyspace == a.spec.Keyspace) && !a.parts[j.Id][p.Shard] {
			return false
		}
	}
	return true
}
