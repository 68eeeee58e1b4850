package bridge

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"

	"github.com/vstream-gateway/vstream-gateway/hub"
	"github.com/vstream-gateway/vstream-gateway/internal/fakevtgate"
	"github.com/vstream-gateway/vstream-gateway/reshard"
	"github.com/vstream-gateway/vstream-gateway/source"
)

// A bridge VStream that goes silent (vtgate searching for the old shard's
// primary while the switch settles) is reopened from the last transaction
// captured: nothing missed, nothing spooled twice.
func TestBridgeReopensStalledStream(t *testing.T) {
	e := newEnv(t, WithStall(100*time.Millisecond))
	j := e.recordJournal(t)
	e.ack(t, "alice", pos(10))
	e.fake.Push(
		fakevtgate.Script{Open: true}, // silent from the start
		fakevtgate.Script{Open: true, Batches: [][]*binlogdatapb.VEvent{s0.Txn(100, pos(11), field(s0), row(s0, "1"))}},
		fakevtgate.Script{Batches: append([][]*binlogdatapb.VEvent{s0.Txn(100, pos(13), field(s0), row(s0, "2"))}, journalEnd()...)},
	)
	sub := bridge(t, e, j)
	for i, want := range []*binlogdatapb.VGtid{pos(10), pos(10), pos(11)} {
		samePos(t, "bridge request", e.fake.Call(t, i).Req.Vgtid, want)
	}
	for i := range 2 {
		<-e.fake.Call(t, i).Done() // the stalled streams were cancelled
	}
	if got := spooled(t, e, sub.Bridges[0].Log); len(got) != 2 || !proto.Equal(got[0], pos(11)) || !proto.Equal(got[1], pos(13)) {
		t.Fatalf("spool holds %v, want the transactions at 11 and 13", got)
	}
}

// A bridge VStream that sends only vtgate's heartbeats (vtgate searching
// for the old shard's primary, or a shard that will never send its journal
// again) is not progressing: it is reopened once it has delivered nothing
// else for the stall window, however often heartbeats come.
func TestBridgeReopensStreamSendingOnlyHeartbeats(t *testing.T) {
	e := newEnv(t, WithStall(300*time.Millisecond))
	j := e.recordJournal(t)
	e.ack(t, "alice", pos(10))
	e.fake.Push(fakevtgate.Script{Open: true, Batches: [][]*binlogdatapb.VEvent{s0.Txn(100, pos(11), field(s0), row(s0, "1"))}})
	// Heartbeats every 50 ms on the first stream until it is cancelled
	// (or for 10 s: a bridge that takes them for progress never is).
	fed := make(chan bool, 1)
	go func() {
		call := e.fake.Call(t, 0)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		giveUp := time.After(10 * time.Second)
		for {
			select {
			case <-call.Done():
				fed <- true
				return
			case <-giveUp:
				fed <- false
				return
			case <-tick.C:
				call.TryAnswer(fakevtgate.Script{Open: true, Batches: [][]*binlogdatapb.VEvent{{fakevtgate.Heartbeat()}}})
			}
		}
	}()
	e.fake.Push(fakevtgate.Script{Batches: journalEnd()})
	sub := bridge(t, e, j)
	if !<-fed {
		t.Fatal("a stream sending only heartbeats was never reopened")
	}
	samePos(t, "the reopened bridge stream", e.fake.Call(t, 1).Req.Vgtid, pos(11))
	if got := spooled(t, e, sub.Bridges[0].Log); len(got) != 1 || !proto.Equal(got[0], pos(11)) {
		t.Fatalf("spool holds %v, want the transaction at 11 once", got)
	}
}

// A merge's bridge stream that stalls between the old shards' journals
// (-80 sent its journal, 80- is still on its way) is reopened with -80
// before its journal: -80 sends it again and the cutover completes. Were
// it reopened from 80-'s last transaction as vtgate numbered it (-80 past
// its journal), -80 would never send its journal again and vtgate would
// wait for it forever: the bridge would hang until its timeout.
func TestBridgeMergeReopensBetweenJournals(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, WithStall(200*time.Millisecond))
	sHi := fakevtgate.Shard{Keyspace: ks, Name: "80-"}
	parts := []string{"-80", "80-"}
	journal := func(shard, local string) *binlogdatapb.Journal {
		return &binlogdatapb.Journal{Id: 9, MigrationType: binlogdatapb.MigrationType_SHARDS, LocalPosition: local,
			ShardGtids:   pos(50).ShardGtids,
			Participants: []*binlogdatapb.KeyspaceShard{{Keyspace: ks, Shard: "-80"}, {Keyspace: ks, Shard: "80-"}}}
	}
	lo, _ := reshard.FromEvent(ks, "-80", journal("-80", "MariaDB/0-2-12"))
	hi, _ := reshard.FromEvent(ks, "80-", journal("80-", "MariaDB/0-3-12"))
	j := e.record(t, lo, hi)
	e.ack(t, "alice", mergePos(10, 10))
	e.fake.Push(
		fakevtgate.Script{Open: true, Batches: [][]*binlogdatapb.VEvent{
			sLo.Txn(100, mergePos(11, 10), field(sLo), row(sLo, "1")),
			sLo.JournalTxn(9, parts, "MariaDB/0-2-12", mergePos(13, 10), "0", gtid(50)),
			sHi.Txn(100, mergePos(13, 11), field(sHi), row(sHi, "2")),
		}},
		fakevtgate.Script{Batches: [][]*binlogdatapb.VEvent{
			sLo.JournalTxn(9, parts, "MariaDB/0-2-12", mergePos(13, 11), "0", gtid(50)),
			sHi.Txn(100, mergePos(13, 12), field(sHi), row(sHi, "3")),
			sHi.JournalTxn(9, parts, "MariaDB/0-3-12", mergePos(13, 13), "0", gtid(50)),
		}},
	)
	st, err := e.br.Subscriber(ctx, e.def, "alice", j)
	if err != nil || st.State != "done" {
		t.Fatalf("Subscriber: %+v, %v", st, err)
	}
	samePos(t, "the reopened bridge stream", e.fake.Call(t, 1).Req.Vgtid, mergePos(12, 11))
	sub, err := e.hub.Cursors().Get(ctx, e.def.Name, "alice")
	if err != nil || len(sub.Bridges) != 1 {
		t.Fatalf("alice after the bridge: %+v, %v", sub, err)
	}
	var got []string
	entries, err := e.st.ReadLog(ctx, sub.Bridges[0].Log, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, en := range entries {
		txn, err := hub.DecodeSpoolEntry(en.Value)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, summary(t, txn))
	}
	if strings.Join(got, " ") != "1 2 3" {
		t.Fatalf("spool %v, want rows 1 2 3 once each", got)
	}
	after := &binlogdatapb.VGtid{}
	if err := proto.Unmarshal(sub.Bridges[0].After, after); err != nil {
		t.Fatal(err)
	}
	samePos(t, "after the bridge", after, pos(50))
}

// A bridge stream that stalls inside a chunked transaction is reopened
// before it and skips what was spooled: the spool holds every row once,
// the pieces with their marks.
func TestBridgeReopensInsideChunkedTransaction(t *testing.T) {
	e := build(t, setup{src: []source.Option{source.WithChunkBytes(1)}, bridge: []Option{WithStall(100 * time.Millisecond)}})
	j := e.recordJournal(t)
	e.ack(t, "alice", pos(10))
	rows := func(ids ...string) [][]*binlogdatapb.VEvent {
		var out [][]*binlogdatapb.VEvent
		for _, id := range ids {
			out = append(out, []*binlogdatapb.VEvent{row(s0, id)})
		}
		return out
	}
	begin := [][]*binlogdatapb.VEvent{{field(s0), s0.Begin(100)}}
	e.fake.Push(
		// Rows 1..3: 1 and 2 are spooled (3 is held back), then silence.
		fakevtgate.Script{Open: true, Batches: append(begin, rows("1", "2", "3")...)},
		fakevtgate.Script{Batches: append(append(append(begin, rows("1", "2", "3", "4")...),
			[]*binlogdatapb.VEvent{s0.Pos(pos(11)), s0.Commit(100)}), journalEnd()...)},
	)
	sub := bridge(t, e, j)
	samePos(t, "the reopened bridge stream", e.fake.Call(t, 1).Req.Vgtid, pos(10))
	entries, err := e.st.ReadLog(context.Background(), sub.Bridges[0].Log, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, en := range entries {
		txn, err := hub.DecodeSpoolEntry(en.Value)
		if err != nil {
			t.Fatal(err)
		}
		s := summary(t, txn)
		if txn.Partial {
			s += "…"
		}
		got = append(got, s)
	}
	if want := "1… | 2… | 3… | 4"; strings.Join(got, " | ") != want {
		t.Fatalf("spool %s, want %s", strings.Join(got, " | "), want)
	}
}
