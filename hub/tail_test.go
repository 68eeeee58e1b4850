package hub

import (
	"fmt"
	"strings"
	"testing"
	"time"

	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"

	"github.com/vstream-gateway/vstream-gateway/event"
	"github.com/vstream-gateway/vstream-gateway/internal/fakevtgate"
	"github.com/vstream-gateway/vstream-gateway/source"
)

// tailEnv is a hub with tails on, whose first VStream call (the tail's,
// from "current") is answered with start and then kept open.
func tailEnv(t *testing.T, start *binlogdatapb.VGtid, o TailOptions) (*env, *fakevtgate.Call) {
	t.Helper()
	return tailEnvShards(t, start, o, "0")
}

// tailEnvShards is tailEnv on a keyspace of the given serving shards.
func tailEnvShards(t *testing.T, start *binlogdatapb.VGtid, o TailOptions, shards ...string) (*env, *fakevtgate.Call) {
	t.Helper()
	return tailEnvSource(t, start, o, nil, shards...)
}

// tailEnvSource is tailEnvShards with options for the source client.
func tailEnvSource(t *testing.T, start *binlogdatapb.VGtid, o TailOptions, srcOpts []source.Option, shards ...string) (*env, *fakevtgate.Call) {
	t.Helper()
	if o.StartWait == 0 {
		o.StartWait = 5 * time.Second
	}
	if o.Idle == 0 {
		o.Idle = time.Minute
	}
	e := newEnvSource(t, srcOpts, WithTails(o))
	e.fake.SetTopology(ks, shards, nil)
	e.fake.Push(fakevtgate.Script{Open: true, Batches: [][]*binlogdatapb.VEvent{{s0.Pos(start)}}})
	first := e.open(t, From{}) // starts the tail, joins at its head
	d := next(t, first)
	samePos(t, "first delivery from now", d.VGtid, start)
	call := e.fake.Call(t, 0)
	samePos(t, "the tail's request", call.Req.Vgtid, fakevtgate.VGtid(ks, "", "current"))
	return e, call
}

// txns are one-row transactions on shard 0 committed now, ids from..to,
// each at the position of its id.
func txns(from, to int) [][]*binlogdatapb.VEvent {
	var out [][]*binlogdatapb.VEvent
	for i := from; i <= to; i++ {
		b := s0.Txn(time.Now().Unix(), pos(i), row(s0, fmt.Sprint(i)))
		if i == from {
			b = append([]*binlogdatapb.VEvent{field(s0)}, b...)
		}
		out = append(out, b)
	}
	return out
}

// read takes n deliveries and renders them as "ids@position" items.
func read(t *testing.T, s *Subscription, n int) []string {
	t.Helper()
	var got []string
	for len(got) < n {
		d := next(t, s)
		if len(d.Events) == 0 {
			continue
		}
		got = append(got, summary(t, d.Txn)+"@"+shortPos(d.VGtid))
	}
	return got
}

func shortPos(v *binlogdatapb.VGtid) string {
	var parts []string
	for _, sg := range v.GetShardGtids() {
		parts = append(parts, sg.Shard+":"+sg.Gtid[strings.LastIndexByte(sg.Gtid, '-')+1:])
	}
	return strings.Join(parts, ",")
}

func want(ids ...int) []string {
	var out []string
	for _, i := range ids {
		out = append(out, fmt.Sprintf("%d@0:%d", i, i))
	}
	return out
}

func same(t *testing.T, what string, got, want []string) {
	t.Helper()
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("%s:\n got %v\nwant %v", what, got, want)
	}
}

// Readers at the live end share the tail: one VStream, the same cursor
// tokens, every transaction once — and the same delivery, made once by the
// tail (§5.2), not a copy each.
func TestTailSharedByLiveReaders(t *testing.T) {
	e, call := tailEnv(t, pos(10), TailOptions{RingBytes: 1 << 20, RingEntries: 100})
	a := e.open(t, From{})
	b := e.open(t, From{})
	for _, s := range []*Subscription{a, b} {
		samePos(t, "first delivery", next(t, s).VGtid, pos(10))
	}
	call.Answer(t, fakevtgate.Script{Open: true, Batches: txns(11, 13)})
	da, db := next(t, a), next(t, b)
	if da.Cursor != db.Cursor || da.Cursor != e.token(t, pos(11)) {
		t.Fatalf("cursors %q and %q, want both the token of %v", da.Cursor, db.Cursor, pos(11))
	}
	if da != db {
		t.Fatal("readers in step with the tail got deliveries of their own, not the tail's")
	}
	same(t, "reader a", read(t, a, 2), want(12, 13))
	same(t, "reader b", read(t, b, 2), want(12, 13))
	if n := e.fake.Calls(); n != 1 {
		t.Fatalf("%d VStream calls, want the tail's only", n)
	}
}

// A cursor inside the ring is served from memory: no VStream.
func TestTailServesCursorInRing(t *testing.T) {
	e, call := tailEnv(t, pos(10), TailOptions{RingBytes: 1 << 20, RingEntries: 100})
	call.Answer(t, fakevtgate.Script{Open: true, Batches: txns(11, 15)})
	live := e.open(t, From{})
	next(t, live)
	first := e.open(t, From{Token: e.token(t, pos(10))})
	same(t, "from the ring's start", read(t, first, 5), want(11, 12, 13, 14, 15))
	mid := e.open(t, From{Token: e.token(t, pos(12))})
	same(t, "from inside the ring", read(t, mid, 3), want(13, 14, 15))
	if n := e.fake.Calls(); n != 1 {
		t.Fatalf("%d VStream calls, want the tail's only", n)
	}
	call.Answer(t, fakevtgate.Script{Open: true, Batches: txns(16, 16)})
	same(t, "then live", read(t, mid, 1), want(16))
}

// A cursor older than the ring catches up on a VStream of its own and
// hands over to the tail where its position reaches the ring: nothing
// missed, nothing repeated, and the catch-up VStream ends.
func TestTailCatchUpHandsOver(t *testing.T) {
	e, call := tailEnv(t, pos(10), TailOptions{RingBytes: 1 << 20, RingEntries: 100})
	// The live reader is on the tail before 11..14 come: opened after,
	// it could start at the head past them (the tail appends at once).
	live := e.open(t, From{})
	next(t, live)
	call.Answer(t, fakevtgate.Script{Open: true, Batches: txns(11, 14)})
	same(t, "tail reader", read(t, live, 4), want(11, 12, 13, 14))

	// The catch-up VStream sends 6..12: it reaches the ring at 10 and
	// must leave it there.
	e.fake.Push(fakevtgate.Script{Open: true, Batches: [][]*binlogdatapb.VEvent{
		append(append(append(append(txns(6, 6)[0], txns(7, 7)[0]...), txns(8, 8)[0]...), txns(9, 9)[0]...), txns(10, 10)[0]...),
	}})
	s := e.open(t, From{Token: e.token(t, pos(5))})
	got := read(t, s, 9)
	catchUp := e.fake.Call(t, 1)
	samePos(t, "catch-up request", catchUp.Req.Vgtid, pos(5))
	same(t, "catch-up then tail", got, want(6, 7, 8, 9, 10, 11, 12, 13, 14))
	select {
	case <-catchUp.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the catch-up VStream stayed open after joining the tail")
	}
}

// A reader slower than the ring is long falls off the tail and goes on
// privately from its own position, without holding the tail back.
func TestTailSlowReaderFallsOff(t *testing.T) {
	e, call := tailEnv(t, pos(10), TailOptions{RingBytes: 1 << 20, RingEntries: 3})
	slow := e.open(t, From{})
	next(t, slow)
	fast := e.open(t, From{})
	next(t, fast)
	call.Answer(t, fakevtgate.Script{Open: true, Batches: txns(11, 11)})
	same(t, "slow reader's first", read(t, slow, 1), want(11))
	same(t, "fast reader's first", read(t, fast, 1), want(11))
	for i := 12; i <= 20; i++ {
		call.Answer(t, fakevtgate.Script{Open: true, Batches: txns(i, i)})
		same(t, "fast reader", read(t, fast, 1), want(i))
	}
	// 12..17 were evicted: the slow reader continues on its own VStream.
	e.fake.Push(fakevtgate.Script{Open: true, Batches: txns(12, 20)})
	same(t, "slow reader", read(t, slow, 9), want(12, 13, 14, 15, 16, 17, 18, 19, 20))
	samePos(t, "the slow reader's own VStream", e.fake.Call(t, 1).Req.Vgtid, pos(11))
}

// Two shards: a cursor minted elsewhere interleaves the shards otherwise.
// The reader gets on each shard exactly what its position lacks there.
func TestTailJoinPerShard(t *testing.T) {
	lo, hi := fakevtgate.Shard{Keyspace: ks, Name: "-80"}, fakevtgate.Shard{Keyspace: ks, Name: "80-"}
	at := func(a, b int) *binlogdatapb.VGtid {
		return fakevtgate.VGtid(ks, "-80", fmt.Sprintf("MariaDB/0-1-%d", a), "80-", fmt.Sprintf("MariaDB/0-2-%d", b))
	}
	ins := func(s fakevtgate.Shard, id string, p *binlogdatapb.VGtid) []*binlogdatapb.VEvent {
		return s.Txn(time.Now().Unix(), p, row(s, id))
	}
	e, call := tailEnvShards(t, at(0, 0), TailOptions{RingBytes: 1 << 20, RingEntries: 100}, "-80", "80-")
	// The tail's order: a1 b1 a2 b2.
	call.Answer(t, fakevtgate.Script{Open: true, Batches: [][]*binlogdatapb.VEvent{
		append([]*binlogdatapb.VEvent{field(lo), field(hi)}, ins(lo, "1", at(1, 0))...),
		ins(hi, "101", at(1, 1)), ins(lo, "2", at(2, 1)), ins(hi, "102", at(2, 2)),
	}})
	live := e.open(t, From{})
	next(t, live)
	read(t, live, 4)

	// Another gateway delivered a1 a2 (not b1): the reader needs b1 b2.
	s := e.open(t, From{Token: e.token(t, at(2, 0))})
	var got []string
	for len(got) < 2 {
		d := next(t, s)
		if len(d.Events) == 0 {
			continue
		}
		// Not in step with the tail (whose position after b1 is a1 b1):
		// the reader's cursor is its own position's.
		if d.Cursor != e.token(t, d.VGtid) {
			t.Fatalf("delivery at %v has another position's cursor", shortPos(d.VGtid))
		}
		got = append(got, summary(t, d.Txn)+"@"+shortPos(d.VGtid))
	}
	same(t, "per-shard join", got, []string{"101@-80:2,80-:1", "102@-80:2,80-:2"})
	if n := e.fake.Calls(); n != 1 {
		t.Fatalf("%d VStream calls, want the tail's only", n)
	}
	// In step with the tail from then on: the tail's own token.
	call.Answer(t, fakevtgate.Script{Open: true, Batches: [][]*binlogdatapb.VEvent{ins(lo, "3", at(3, 2))}})
	d := next(t, s)
	if d.Cursor != e.token(t, at(3, 2)) || summary(t, d.Txn) != "3" {
		t.Fatalf("after the join: %q at %v", summary(t, d.Txn), d.VGtid)
	}
	if d != next(t, live) {
		t.Fatal("in step after the join, the reader did not get the tail's shared delivery")
	}
}

// A reshard seen by the tail: followers get the reshard event once and go
// on with the new shards, with positions from the journal.
func TestTailFollowsReshard(t *testing.T) {
	e, call := tailEnv(t, pos(18), TailOptions{RingBytes: 1 << 20, RingEntries: 100})
	lo := fakevtgate.Shard{Keyspace: ks, Name: "-80"}
	r := e.open(t, From{})
	next(t, r)
	after := fakevtgate.VGtid(ks, "-80", "MariaDB/0-2-6", "80-", "MariaDB/0-3-5")
	call.Answer(t, fakevtgate.Script{Open: true, Batches: [][]*binlogdatapb.VEvent{
		txns(19, 19)[0],
		s0.JournalTxn(7, []string{"0"}, gtid(19), pos(20), "-80", "MariaDB/0-2-5", "80-", "MariaDB/0-3-5"),
		append([]*binlogdatapb.VEvent{field(lo)}, lo.Txn(time.Now().Unix(), after, row(lo, "21"))...),
	}})
	same(t, "before the cutover", read(t, r, 1), want(19))
	var reshards int
	for {
		d := next(t, r)
		if len(d.Events) > 0 && d.Events[0].Type == event.TypeReshard {
			reshards++
			continue
		}
		if summary(t, d.Txn) == "21" {
			samePos(t, "after the cutover", d.VGtid, after)
			if d.Cursor != e.token(t, after) {
				t.Fatalf("cursor after the cutover is not the tail's")
			}
			break
		}
	}
	if reshards != 1 {
		t.Fatalf("%d reshard events, want 1", reshards)
	}

	// The old shard is deleted: a cursor from before the cutover would get
	// a resync from vtgate's side, but the ring still holds what followed
	// it, across the reshard.
	e.fake.SetTopology(ks, []string{"-80", "80-"}, nil)
	old := e.open(t, From{Token: e.token(t, pos(18))})
	var got []string
	for len(got) < 3 {
		d := next(t, old)
		for _, ev := range d.Events {
			if ev.Type == event.TypeResync {
				t.Fatal("resync for a cursor the ring covers")
			}
		}
		if len(d.Events) > 0 {
			got = append(got, summary(t, d.Txn))
		}
	}
	same(t, "old cursor through the ring", got, []string{"19", "reshard", "21"})
	if n := e.fake.Calls(); n != 1 {
		t.Fatalf("%d VStream calls, want the tail's only", n)
	}
}

// A stream defined again with another filter but the same creation time
// (the streams file re-read at start-up keeps created_at) gets a new
// tail: the old one reads the old filter.
func TestTailRestartsOnFilterChange(t *testing.T) {
	e, first := tailEnv(t, pos(10), TailOptions{RingBytes: 1 << 20, RingEntries: 100})
	redefined := *e.def
	redefined.Tables = []string{"t", "u"}
	if err := redefined.Normalize(); err != nil {
		t.Fatal(err)
	}
	e.def = &redefined
	e.fake.Push(fakevtgate.Script{Open: true, Batches: [][]*binlogdatapb.VEvent{{s0.Pos(pos(12))}}})
	samePos(t, "first delivery", next(t, e.open(t, From{})).VGtid, pos(12))
	<-first.Done() // the old tail stopped
	req := e.fake.Call(t, 1).Req
	samePos(t, "the new tail's request", req.Vgtid, fakevtgate.VGtid(ks, "", "current"))
	if rules := req.Filter.GetRules(); len(rules) != 2 || rules[1].Match != "u" {
		t.Fatalf("the new tail's filter %v, want t and u", rules)
	}
}
