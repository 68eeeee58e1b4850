package source_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"
	topodatapb "vitess.io/vitess/go/vt/proto/topodata"
	vtrpcpb "vitess.io/vitess/go/vt/proto/vtrpc"
	"vitess.io/vitess/go/vt/vterrors"

	"github.com/vstream-gateway/vstream-gateway/event"
	"github.com/vstream-gateway/vstream-gateway/internal/fakevtgate"
	"github.com/vstream-gateway/vstream-gateway/source"
)

// A transaction arrives whole, however vtgate splits it across responses:
// a position is never handed out mid-transaction.
func TestTransactionSplitAcrossBatches(t *testing.T) {
	fake, c := setup(t, source.WithHeartbeat(2*time.Second))
	fake.Push(fakevtgate.Script{Open: true, Batches: [][]*binlogdatapb.VEvent{
		{s0.Begin(100), tField},
		{s0.Insert("t", 100, []string{"1", "a"})},
		{s0.Insert("t", 100, []string{"2", "b"}), s0.Pos(pos(11))},
		{s0.Commit(100)},
		s0.Txn(101, pos(12), s0.Insert("t", 101, []string{"3", "c"})),
	}})
	r := open(t, c, pos(10))

	txn := next(t, r)
	if got, want := summary(t, txn), `insert {"id":1,"doc":"a"}; insert {"id":2,"doc":"b"}`; got != want {
		t.Fatalf("first transaction: %s, want %s", got, want)
	}
	samePos(t, "first transaction", txn.VGtid, pos(11))
	if txn.CommitTS != 100 {
		t.Errorf("CommitTS %d, want 100", txn.CommitTS)
	}
	txn = next(t, r)
	if got, want := summary(t, txn), `insert {"id":3,"doc":"c"}`; got != want {
		t.Fatalf("second transaction: %s, want %s", got, want)
	}
	samePos(t, "second transaction", txn.VGtid, pos(12))

	// What the gateway asks vtgate for (DESIGN §4 rule 1: journals always).
	req := fake.Call(t, 0).Req
	samePos(t, "request", req.Vgtid, pos(10))
	f := req.Flags
	if !f.IncludeReshardJournalEvents || f.StopOnReshard || !f.ExcludeKeyspaceFromTableName || f.HeartbeatInterval != 2 {
		t.Errorf("flags %v", f)
	}
	if req.TabletType != topodatapb.TabletType_PRIMARY || len(req.Filter.Rules) != 1 || req.Filter.Rules[0].Filter != "select * from `t`" {
		t.Errorf("tablet type %v, filter %v", req.TabletType, req.Filter)
	}
}

// Transactions the filter dropped, and positions outside transactions,
// still move the position.
func TestPositionOnlyTransactions(t *testing.T) {
	fake, c := setup(t)
	fake.Push(fakevtgate.Script{Open: true, Batches: [][]*binlogdatapb.VEvent{
		s0.Txn(100, pos(11)),
		{s0.Pos(pos(12))},
	}})
	r := open(t, c, pos(10))
	for i, want := range []*binlogdatapb.VGtid{pos(11), pos(12)} {
		txn := next(t, r)
		if len(txn.Events) != 0 || txn.Heartbeat || txn.Journal != nil {
			t.Fatalf("transaction %d: %+v, want position only", i, txn)
		}
		samePos(t, "position-only transaction", txn.VGtid, want)
	}
}

// Copy-phase rows (no binlog timestamp) are snapshot rows; the final
// COPY_COMPLETED (no keyspace, no shard) becomes snapshot_complete, and
// binlog rows follow as inserts.
func TestCopyPhase(t *testing.T) {
	fake, c := setup(t)
	copying := &binlogdatapb.VGtid{ShardGtids: []*binlogdatapb.ShardGtid{{Keyspace: ks, Shard: "0", Gtid: gtid(10),
		TablePKs: []*binlogdatapb.TableLastPK{{TableName: "t"}}}}}
	fake.Push(fakevtgate.Script{Open: true, Batches: [][]*binlogdatapb.VEvent{
		s0.Txn(0, copying, tField),
		s0.Txn(0, copying, s0.Insert("t", 0, []string{"1", "a"}, []string{"2", "b"})),
		{s0.CopyCompleted()},
		{fakevtgate.StreamCopied()},
		s0.Txn(100, pos(11), s0.Insert("t", 100, []string{"3", "c"})),
	}})
	r := open(t, c, source.SnapshotPosition(ks))

	if txn := next(t, r); len(txn.Events) != 0 {
		t.Fatalf("FIELD transaction delivered %s", summary(t, txn))
	}
	txn := next(t, r)
	if got, want := summary(t, txn), `snapshot {"id":1,"doc":"a"}; snapshot {"id":2,"doc":"b"}`; got != want {
		t.Fatalf("copy rows: %s, want %s", got, want)
	}
	if txn.CommitTS != 0 || string(members(t, txn.Events[0])["commit_ts"]) != "null" {
		t.Errorf("copy rows carry commit time %d / %s", txn.CommitTS, members(t, txn.Events[0])["commit_ts"])
	}
	txn = next(t, r)
	if len(txn.Events) != 1 || txn.Events[0].Type != event.TypeSnapshotComplete {
		t.Fatalf("after the copy phase: %s, want one snapshot_complete", summary(t, txn))
	}
	samePos(t, "snapshot_complete", txn.VGtid, copying)
	txn = next(t, r)
	if got, want := summary(t, txn), `insert {"id":3,"doc":"c"}`; got != want {
		t.Fatalf("after the copy phase: %s, want %s", got, want)
	}
	samePos(t, "request", fake.Call(t, 0).Req.Vgtid, source.SnapshotPosition(ks))
}

// MariaDB's JSON columns are found from SHOW CREATE TABLE and embedded as
// JSON; other text stays a string.
func TestJSONColumnFromCreateTable(t *testing.T) {
	fake, c := setup(t)
	fake.SetCreateTable("t", "CREATE TABLE `t` (\n  `id` bigint(20) NOT NULL,\n"+
		"  `c` longtext CHARACTER SET utf8mb4 COLLATE utf8mb4_bin DEFAULT NULL CHECK (json_valid(`c`)),\n"+
		"  `d` longtext CHARACTER SET utf8mb4 COLLATE utf8mb4_bin DEFAULT NULL,\n  PRIMARY KEY (`id`)\n)")
	fake.Push(fakevtgate.Script{Open: true, Batches: [][]*binlogdatapb.VEvent{
		s0.Txn(100, pos(11), s0.Field("t", fakevtgate.BigintPK("id"), fakevtgate.LongText("c"), fakevtgate.LongText("d")),
			s0.Insert("t", 100, []string{"1", `{"a": [1, 2]}`, `{"a": [1, 2]}`})),
	}})
	r := open(t, c, pos(10))
	if got, want := summary(t, next(t, r)), `insert {"id":1,"c":{"a":[1,2]},"d":"{\"a\": [1, 2]}"}`; got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
	q := fake.Queries()
	if len(q) != 1 || q[0].SQL != "show create table `t`" || q[0].Target != "customer@primary" {
		t.Errorf("schema queries %+v", q)
	}
}

// A DDL is delivered as a control event at the position vtgate sent
// before it, and makes the next FIELD event re-read the schema.
func TestDDLInvalidatesSchema(t *testing.T) {
	fake, c := setup(t)
	fake.SetCreateTable("t", tJSON)
	r := open(t, c, pos(10))
	call := fake.Call(t, 0)
	call.Answer(t, fakevtgate.Script{Open: true, Batches: [][]*binlogdatapb.VEvent{
		s0.Txn(100, pos(11), tField, s0.Insert("t", 100, []string{"1", `{"v":1}`})),
		// vtgate sends FIELD again on every new stream; the cache keeps
		// this one from costing a query.
		s0.Txn(101, pos(12), tField, s0.Insert("t", 101, []string{"2", `{"v":2}`})),
	}})
	for i, want := range []string{`insert {"id":1,"doc":{"v":1}}`, `insert {"id":2,"doc":{"v":2}}`} {
		if got := summary(t, next(t, r)); got != want {
			t.Fatalf("before DDL %d: %s, want %s", i, got, want)
		}
	}
	if n := len(fake.Queries()); n != 1 {
		t.Fatalf("%d schema queries before the DDL, want 1", n)
	}

	fake.SetCreateTable("t", tText) // the DDL drops the CHECK
	const stmt = "alter table t drop constraint doc"
	call.Answer(t, fakevtgate.Script{Open: true, Batches: [][]*binlogdatapb.VEvent{
		{s0.Pos(pos(13)), s0.DDL(102, stmt)},
		s0.Txn(103, pos(14), tField, s0.Insert("t", 103, []string{"3", `{"v":3}`})),
	}})
	txn := next(t, r)
	samePos(t, "position before the DDL", txn.VGtid, pos(13))
	txn = next(t, r)
	if len(txn.Events) != 1 || txn.Events[0].Type != event.TypeDDL || string(members(t, txn.Events[0])["statement"]) != `"`+stmt+`"` {
		t.Fatalf("DDL delivered as %s", txn.Events[0].AppendJSON(nil, ""))
	}
	samePos(t, "DDL", txn.VGtid, pos(13))
	if got, want := summary(t, next(t, r)), `insert {"id":3,"doc":"{\"v\":3}"}`; got != want {
		t.Fatalf("after DDL: %s, want %s (schema not re-read)", got, want)
	}
	if n := len(fake.Queries()); n != 2 {
		t.Fatalf("%d schema queries, want 2", n)
	}
}

// Each participant of a merge sends its own JOURNAL: the hook sees both,
// the client one reshard event.
func TestJournalOncePerID(t *testing.T) {
	type seen struct{ keyspace, shard, local string }
	var (
		mu    sync.Mutex
		calls []seen
	)
	hook := func(_ context.Context, keyspace, shard string, j *binlogdatapb.Journal) {
		mu.Lock()
		defer mu.Unlock()
		calls = append(calls, seen{keyspace, shard, j.LocalPosition})
	}
	fake, c := setup(t, source.WithJournalHook(hook))
	a, b := fakevtgate.Shard{Keyspace: ks, Name: "-80"}, fakevtgate.Shard{Keyspace: ks, Name: "80-"}
	from := fakevtgate.VGtid(ks, "-80", "MariaDB/0-1-20", "80-", "MariaDB/0-2-30")
	afterA := fakevtgate.VGtid(ks, "-80", "MariaDB/0-1-21", "80-", "MariaDB/0-2-30")
	afterB := fakevtgate.VGtid(ks, "-80", "MariaDB/0-1-21", "80-", "MariaDB/0-2-31")
	parts := []string{"-80", "80-"}
	fake.Push(fakevtgate.Script{Open: true, Batches: [][]*binlogdatapb.VEvent{
		a.JournalTxn(7, parts, "MariaDB/0-1-20", afterA, "0", "MariaDB/0-3-5"),
		b.JournalTxn(7, parts, "MariaDB/0-2-30", afterB, "0", "MariaDB/0-3-5"),
	}})
	r := open(t, c, from)

	txn := next(t, r)
	if txn.Journal == nil || len(txn.Events) != 1 || txn.Events[0].Type != event.TypeReshard {
		t.Fatalf("first JOURNAL: journal %v, events %d", txn.Journal, len(txn.Events))
	}
	m := members(t, txn.Events[0])
	if string(m["from"]) != `["-80","80-"]` || string(m["to"]) != `["0"]` || string(m["journal_id"]) != `"7"` || string(m["keyspace"]) != `"customer"` {
		t.Errorf("reshard event %s", txn.Events[0].AppendJSON(nil, ""))
	}
	// Positions keep each participant before its journal (assemble.go,
	// "Positions at a reshard cutover"): afterA and afterB are past it.
	samePos(t, "first JOURNAL", txn.VGtid, from)
	txn = next(t, r)
	if txn.Journal == nil || len(txn.Events) != 0 {
		t.Fatalf("second participant's JOURNAL: journal %v, %d events, want no second reshard event", txn.Journal, len(txn.Events))
	}
	samePos(t, "second JOURNAL", txn.VGtid, from)

	mu.Lock()
	defer mu.Unlock()
	want := []seen{{ks, "-80", "MariaDB/0-1-20"}, {ks, "80-", "MariaDB/0-2-30"}}
	if len(calls) != 2 || calls[0] != want[0] || calls[1] != want[1] {
		t.Errorf("journal hook calls %+v, want %+v", calls, want)
	}
}

// vtgate heartbeats are delivered at the current position; one arriving
// inside a transaction is not a position and is dropped.
func TestHeartbeat(t *testing.T) {
	fake, c := setup(t)
	fake.Push(fakevtgate.Script{Open: true, Batches: [][]*binlogdatapb.VEvent{
		s0.Txn(100, pos(11), tField, s0.Insert("t", 100, []string{"1", "a"})),
		{fakevtgate.Heartbeat()},
		{s0.Begin(101)},
		{fakevtgate.Heartbeat()},
		{s0.Insert("t", 101, []string{"2", "b"}), s0.Pos(pos(12)), s0.Commit(101)},
	}})
	r := open(t, c, pos(10))
	next(t, r)
	hb := next(t, r)
	if !hb.Heartbeat || len(hb.Events) != 0 {
		t.Fatalf("want a heartbeat, got %+v", hb)
	}
	samePos(t, "heartbeat", hb.VGtid, pos(11))
	txn := next(t, r)
	if txn.Heartbeat || summary(t, txn) != `insert {"id":2,"doc":"b"}` {
		t.Fatalf("after the heartbeat: heartbeat=%v %s", txn.Heartbeat, summary(t, txn))
	}
}

// A stream cut mid-transaction resumes from the last committed position:
// the cut transaction is not delivered in part, and nothing twice.
func TestReconnectMidTransaction(t *testing.T) {
	fake, c := setup(t, source.WithMaxRetryWait(200*time.Millisecond))
	fake.Push(fakevtgate.Script{
		Batches: [][]*binlogdatapb.VEvent{
			s0.Txn(100, pos(11), tField, s0.Insert("t", 100, []string{"1", "a"})),
			// The VGTID of the cut transaction arrives before the cut: it
			// must not become the resume position.
			{s0.Begin(101), s0.Insert("t", 101, []string{"2", "b"}), s0.Pos(pos(12))},
		},
		Err: vterrors.Errorf(vtrpcpb.Code_UNAVAILABLE, "vstream ended: error streaming from tablet: connection refused"),
	}, fakevtgate.Script{Open: true, Batches: [][]*binlogdatapb.VEvent{
		s0.Txn(101, pos(12), tField, s0.Insert("t", 101, []string{"2", "b"})),
		s0.Txn(102, pos(13), s0.Insert("t", 102, []string{"3", "c"})),
	}})
	r := open(t, c, pos(10))

	for i, want := range []string{`insert {"id":1,"doc":"a"}`, `insert {"id":2,"doc":"b"}`, `insert {"id":3,"doc":"c"}`} {
		txn := next(t, r)
		if got := summary(t, txn); got != want {
			t.Fatalf("transaction %d: %s, want %s", i, got, want)
		}
		samePos(t, "transaction", txn.VGtid, pos(11+i))
	}
	samePos(t, "resumed request", fake.Call(t, 1).Req.Vgtid, pos(11))
	if txn, ok, err := r.TryNext(); ok || err != nil {
		t.Fatalf("extra delivery %+v, %v", txn, err)
	}
}

// A ROW whose FIELD event is missing makes the reader reconnect from the
// last whole transaction, so vtgate sends the FIELD event again.
func TestRowBeforeFieldReconnects(t *testing.T) {
	fake, c := setup(t)
	fake.Push(fakevtgate.Script{Open: true, Batches: [][]*binlogdatapb.VEvent{
		s0.Txn(100, pos(11), s0.Insert("t", 100, []string{"1", "a"})),
	}}, fakevtgate.Script{Open: true, Batches: [][]*binlogdatapb.VEvent{
		s0.Txn(100, pos(11), tField, s0.Insert("t", 100, []string{"1", "a"})),
	}})
	r := open(t, c, pos(10))
	if got := summary(t, next(t, r)); got != `insert {"id":1,"doc":"a"}` {
		t.Fatalf("got %s", got)
	}
	samePos(t, "resumed request", fake.Call(t, 1).Req.Vgtid, pos(10))
}

// Errors that name the position or the filter end the reader: retrying
// would fail the same way. Transient ones, vtgate's "Canceled" after its
// tablet search included, are retried.
func TestPermanentErrorsNotRetried(t *testing.T) {
	fake, c := setup(t)
	for _, tc := range []struct {
		name    string
		err     error
		code    string // as the client reads it
		missing string // the shard MissingShard names
	}{
		{"shard deleted", vterrors.Errorf(vtrpcpb.Code_FAILED_PRECONDITION,
			"failed to determine if keyspace customer has been resharded: shard provided in VGTID, 0, not found in the customer keyspace"),
			"code = FailedPrecondition desc = ", "0"},
		{"filter rejected at first row", vterrors.Errorf(vtrpcpb.Code_UNKNOWN,
			"vttablet: rpc error: code = Unknown desc = stream (at source tablet) error @ MariaDB/0-1-12: failed to build table replication plan: unexpected: 1 != 1"),
			"code = Unknown desc = ", ""},
		// FAILED_PRECONDITION is transient for a tablet in the wrong
		// state, but not when the filter names a column the table lacks.
		{"filter column dropped", vterrors.Errorf(vtrpcpb.Code_FAILED_PRECONDITION,
			"persistent error in vstream for customer/0 on tablet zone1-0000000200; giving up: column doc not found in table t"),
			"code = FailedPrecondition desc = ", ""},
		// As vtgate v0.24.4 answers a VStream on a keyspace it does not know.
		{"keyspace unknown", vterrors.Errorf(vtrpcpb.Code_UNKNOWN,
			"failed to resolve vstream parameters: failed to get shards in keyspace nosuch: keyspace nosuch fetch error: node doesn't exist: /vitess/zone1/keyspaces/nosuch/SrvKeyspace"),
			"code = Unknown desc = ", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := fake.Calls()
			fake.Push(fakevtgate.Script{Err: tc.err})
			r := c.Open(context.Background(), spec, pos(10))
			_, err := nextErr(r)
			r.Close()
			if err == nil || source.Retryable(err) || !strings.Contains(err.Error(), tc.code) {
				t.Fatalf("Next: %v (retryable %v), want a permanent error with %q", err, source.Retryable(err), tc.code)
			}
			if n := fake.Calls() - calls; n != 1 {
				t.Fatalf("%d VStream calls, want 1 (no retry)", n)
			}
			if _, err2 := nextErr(r); err2 != err {
				t.Errorf("Next after the error: %v, want the same error", err2)
			}
			k, shard, ok := source.MissingShard(err)
			if ok != (tc.missing != "") || shard != tc.missing || ok && k != ks {
				t.Errorf("MissingShard = %q, %q, %v; want shard %q", k, shard, ok, tc.missing)
			}
		})
	}
	t.Run("tablet search gave up", func(t *testing.T) {
		calls := fake.Calls()
		fake.Push(fakevtgate.Script{Err: vterrors.Errorf(vtrpcpb.Code_CANCELED,
			"failed to find a PRIMARY tablet for VStream in customer/0 within the time limit: context has expired")})
		open(t, c, pos(10))
		samePos(t, "retry", fake.Call(t, calls+1).Req.Vgtid, pos(10))
	})
}

// With StopOnReshard a clean end before any journal is retried; after the
// journal it ends the reader with ErrStopped.
func TestStopOnReshard(t *testing.T) {
	fake, c := setup(t)
	fake.Push(fakevtgate.Script{Batches: [][]*binlogdatapb.VEvent{
		s0.Txn(100, pos(11), tField, s0.Insert("t", 100, []string{"1", "a"})),
	}}, fakevtgate.Script{Batches: [][]*binlogdatapb.VEvent{
		s0.Txn(101, pos(12), tField, s0.Insert("t", 101, []string{"2", "b"})),
		s0.JournalTxn(7, []string{"0"}, gtid(12), pos(13), "-80", "MariaDB/0-2-5", "80-", "MariaDB/0-3-5"),
	}})
	r := open(t, c, pos(10), source.StopOnReshard())
	next(t, r)
	next(t, r)
	if txn := next(t, r); txn.Journal == nil {
		t.Fatalf("want the journal, got %s", summary(t, txn))
	}
	for range 2 {
		if _, err := nextErr(r); !errors.Is(err, source.ErrStopped) {
			t.Fatalf("after the journal: %v, want ErrStopped", err)
		}
	}
	r.Close()
	if n := fake.Calls(); n != 2 {
		t.Fatalf("%d VStream calls, want 2", n)
	}
	for i := range 2 {
		if req := fake.Call(t, i).Req; !req.Flags.StopOnReshard {
			t.Errorf("call %d without stop_on_reshard", i)
		}
	}
	samePos(t, "retry before the journal", fake.Call(t, 1).Req.Vgtid, pos(11))
}

// Close ends the reader's goroutine and its VStream whatever it is doing:
// waiting in Recv, blocked on a full queue, backing off, or finished.
func TestCloseLeavesNoGoroutines(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	fake := fakevtgate.New(t)
	c := dial(t, fake, source.WithQueue(1))
	var many [][]*binlogdatapb.VEvent
	many = append(many, s0.Txn(100, pos(11), tField, s0.Insert("t", 100, []string{"1", "a"})))
	for i := range 10 {
		many = append(many, s0.Txn(100, pos(12+i), s0.Insert("t", 100, []string{"1", "a"})))
	}

	fake.Push(fakevtgate.Script{Open: true})
	r := c.Open(context.Background(), spec, pos(10))
	call := fake.Call(t, 0)
	r.Close()
	<-call.Done() // the VStream was cancelled, not left open

	fake.Push(fakevtgate.Script{Open: true, Batches: many})
	r = c.Open(context.Background(), spec, pos(10))
	next(t, r)
	r.Close()

	fake.Push(fakevtgate.Script{Err: vterrors.Errorf(vtrpcpb.Code_UNAVAILABLE, "tablet went away")})
	r = c.Open(context.Background(), spec, pos(10))
	<-fake.Call(t, 2).Done()
	r.Close()

	fake.Push(fakevtgate.Script{Err: vterrors.Errorf(vtrpcpb.Code_INVALID_ARGUMENT, "bad filter")})
	r = c.Open(context.Background(), spec, pos(10))
	<-fake.Call(t, 3).Done()
	r.Close()

	c.Close()
	fake.Stop()
	goleak.VerifyNone(t, ignore)
}

// With StopOnReshard, once the journal has been delivered everything the
// old shard had is delivered: a stream that then breaks (vtgate waits
// 0.5 s before its EOF) must end with ErrStopped too. Resuming instead
// would start from the journal transaction's position, past the cutover on
// the old shard, where vtgate never sends the journal again and the stream
// idles until the caller gives up.
func TestStopOnReshardBreakAfterJournal(t *testing.T) {
	fake, c := setup(t)
	fake.Push(fakevtgate.Script{Batches: [][]*binlogdatapb.VEvent{
		s0.Txn(101, pos(12), tField, s0.Insert("t", 101, []string{"2", "b"})),
		s0.JournalTxn(7, []string{"0"}, gtid(12), pos(13), "-80", "MariaDB/0-2-5", "80-", "MariaDB/0-3-5"),
	}, Err: vterrors.Errorf(vtrpcpb.Code_UNAVAILABLE, "vtgate shutting down")})
	r := open(t, c, pos(10), source.StopOnReshard())
	next(t, r)
	if txn := next(t, r); txn.Journal == nil {
		t.Fatalf("want the journal, got %s", summary(t, txn))
	}
	if _, err := nextErr(r); !errors.Is(err, source.ErrStopped) {
		t.Fatalf("after the journal and a broken stream: %v, want ErrStopped", err)
	}
	r.Close()
	if n := fake.Calls(); n != 1 {
		t.Fatalf("%d VStream calls, want 1", n)
	}
}

// In a merge each old shard sends its own JOURNAL and vtgate ends a
// stop_on_reshard stream only once all have. A stream that breaks after
// some of them is resumed: the others still have events to deliver. It
// resumes with -80 before its journal (the journal's local position), so
// that -80 sends it again: resumed past it, -80 would never send it and
// vtgate would wait for it forever.
func TestStopOnReshardPartialMergeJournalResumes(t *testing.T) {
	fake, c := setup(t)
	a := fakevtgate.Shard{Keyspace: ks, Name: "-80"}
	from := fakevtgate.VGtid(ks, "-80", "MariaDB/0-1-20", "80-", "MariaDB/0-2-29")
	afterA := fakevtgate.VGtid(ks, "-80", "MariaDB/0-1-21", "80-", "MariaDB/0-2-29")
	fake.Push(fakevtgate.Script{Batches: [][]*binlogdatapb.VEvent{
		a.JournalTxn(7, []string{"-80", "80-"}, "MariaDB/0-1-20", afterA, "0", "MariaDB/0-3-5"),
	}, Err: vterrors.Errorf(vtrpcpb.Code_UNAVAILABLE, "tablet for 80- went away")})
	r := open(t, c, from, source.StopOnReshard())
	if txn := next(t, r); txn.Journal == nil {
		t.Fatalf("want the journal of -80, got %s", summary(t, txn))
	}
	samePos(t, "resumed request", fake.Call(t, 1).Req.Vgtid, from)
	if txn, ok, err := r.TryNext(); ok || err != nil {
		t.Fatalf("after a partial journal: %+v, %v; want the reader still streaming", txn, err)
	}
}

// A read-ahead budget smaller than one transaction still lets every
// transaction through, one at a time.
func TestReadAheadSmallerThanATransaction(t *testing.T) {
	fake, c := setup(t, source.WithReadAhead(1))
	var batches [][]*binlogdatapb.VEvent
	for i := 0; i < 20; i++ {
		batches = append(batches, s0.Txn(int64(100+i), pos(11+i),
			s0.Insert("t", int64(100+i), []string{fmt.Sprint(2 * i), strings.Repeat("x", 500)}, []string{fmt.Sprint(2*i + 1), "y"})))
	}
	fake.Push(fakevtgate.Script{Open: true, Batches: append([][]*binlogdatapb.VEvent{{tField}}, batches...)})
	r := open(t, c, pos(10))
	for i := 0; i < 20; i++ {
		txn := next(t, r)
		if len(txn.Events) != 2 {
			t.Fatalf("transaction %d: %d events", i, len(txn.Events))
		}
		samePos(t, fmt.Sprint("transaction ", i), txn.VGtid, pos(11+i))
	}
}

// Between the participants' journals of a merge, the other shard's
// transactions carry a VGTID with the first shard past its journal.
// Positions handed out keep that shard at its journal's local position
// until vtgate continues on the targets, so a stream resumed in between
// (here: it breaks) gets the journal again instead of waiting forever
// for it; the targets' positions pass through untouched.
func TestCutoverHoldsParticipantsBeforeTheirJournals(t *testing.T) {
	fake, c := setup(t)
	a, b := fakevtgate.Shard{Keyspace: ks, Name: "-80"}, fakevtgate.Shard{Keyspace: ks, Name: "80-"}
	bField := b.Field("t", fakevtgate.BigintPK("id"), fakevtgate.LongText("doc"))
	from := fakevtgate.VGtid(ks, "-80", "MariaDB/0-1-20", "80-", "MariaDB/0-2-29")
	afterA := fakevtgate.VGtid(ks, "-80", "MariaDB/0-1-21", "80-", "MariaDB/0-2-29")
	rowB := fakevtgate.VGtid(ks, "-80", "MariaDB/0-1-21", "80-", "MariaDB/0-2-30")
	held := fakevtgate.VGtid(ks, "-80", "MariaDB/0-1-20", "80-", "MariaDB/0-2-30")
	afterB := fakevtgate.VGtid(ks, "-80", "MariaDB/0-1-21", "80-", "MariaDB/0-2-31")
	bothHeld := fakevtgate.VGtid(ks, "-80", "MariaDB/0-1-20", "80-", "MariaDB/0-2-30")
	onTarget := fakevtgate.VGtid(ks, "0", "MariaDB/0-3-6")
	parts := []string{"-80", "80-"}
	fake.Push(
		fakevtgate.Script{Batches: [][]*binlogdatapb.VEvent{
			a.JournalTxn(7, parts, "MariaDB/0-1-20", afterA, "0", "MariaDB/0-3-5"),
			b.Txn(100, rowB, bField, b.Insert("t", 100, []string{"1", "x"})),
		}, Err: vterrors.Errorf(vtrpcpb.Code_UNAVAILABLE, "vtgate shutting down")},
		fakevtgate.Script{Open: true, Batches: [][]*binlogdatapb.VEvent{
			a.JournalTxn(7, parts, "MariaDB/0-1-20", afterA, "0", "MariaDB/0-3-5"),
			b.JournalTxn(7, parts, "MariaDB/0-2-30", afterB, "0", "MariaDB/0-3-5"),
			fakevtgate.Shard{Keyspace: ks, Name: "0"}.Txn(101, onTarget, s0.Field("t", fakevtgate.BigintPK("id"), fakevtgate.LongText("doc")), s0.Insert("t", 101, []string{"2", "y"})),
		}},
	)
	r := open(t, c, from)
	if txn := next(t, r); txn.Journal == nil {
		t.Fatalf("want -80's journal, got %s", summary(t, txn))
	} else {
		samePos(t, "-80's journal", txn.VGtid, from)
	}
	samePos(t, "80-'s row after -80's journal", next(t, r).VGtid, held)
	samePos(t, "the resumed request", fake.Call(t, 1).Req.Vgtid, held)
	next(t, r) // -80's journal again
	samePos(t, "the last participant's journal", next(t, r).VGtid, bothHeld)
	samePos(t, "the first row on the target", next(t, r).VGtid, onTarget)
	r.Close()
}
