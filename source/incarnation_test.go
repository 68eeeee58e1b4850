package source_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"

	"github.com/vstream-gateway/vstream-gateway/internal/fakevtgate"
	"github.com/vstream-gateway/vstream-gateway/position"
	"github.com/vstream-gateway/vstream-gateway/source"
)

// incarnationsOf answers from a map of "keyspace/shard" to incarnation,
// counting the questions.
type incarnationsOf struct {
	mu    sync.Mutex
	m     map[string]string
	asked int
	err   error
}

func (f *incarnationsOf) set(key, inc string) { f.mu.Lock(); f.m[key] = inc; f.mu.Unlock() }

func (f *incarnationsOf) lookup(_ context.Context, keyspace string) (func(string) string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked++
	if f.err != nil {
		return nil, f.err
	}
	m := map[string]string{}
	for k, v := range f.m {
		m[k] = v
	}
	return func(shard string) string { return m[keyspace+"/"+shard] }, nil
}

func entry(t *testing.T, v *binlogdatapb.VGtid, shard string) position.Shard {
	t.Helper()
	s, ok := position.Of(v).Lookup(ks, shard)
	if !ok {
		t.Fatalf("no entry for %s in %v", shard, position.Of(v))
	}
	return s
}

// A stream opened at a position of the second shard "0" reads on with
// that incarnation; vtgate never sees it.
func TestReaderKeepsTheIncarnationItOpenedAt(t *testing.T) {
	incs := &incarnationsOf{m: map[string]string{}}
	fake, c := setup(t, source.WithIncarnations(incs.lookup))
	fake.Push(fakevtgate.Script{Open: true, Batches: [][]*binlogdatapb.VEvent{
		s0.Txn(100, pos(11), tField, s0.Insert("t", 100, []string{"1", "a"})),
	}})
	from := position.New(position.Shard{Keyspace: ks, Shard: "0", GTID: gtid(10), Incarnation: "j1"}).VGtid()
	r := open(t, c, from)
	txn := next(t, r)
	if s := entry(t, txn.VGtid, "0"); s.Incarnation != "j1" || s.GTID != gtid(11) {
		t.Errorf("position after the transaction: %+v, want %s of incarnation j1", s, gtid(11))
	}
	if got := fake.Call(t, 0).Req.Vgtid.ShardGtids[0].Gtid; got != gtid(10) {
		t.Errorf("vtgate was asked for %q, want %q (no incarnation)", got, gtid(10))
	}
	if incs.asked != 0 {
		t.Errorf("incarnations asked %d times for a shard the position named", incs.asked)
	}
}

// A stream opened at "current" stamps the shards vtgate chose with the
// incarnations it is told; one that crosses a merge back to a name it
// read before asks again for the new shard, and the journal it hands on
// carries the incarnations too.
func TestReaderStampsShardsItWasNotGiven(t *testing.T) {
	incs := &incarnationsOf{m: map[string]string{ks + "/-80": "", ks + "/80-": "", ks + "/0": "j1"}}
	fake, c := setup(t, source.WithIncarnations(incs.lookup))
	a, b := fakevtgate.Shard{Keyspace: ks, Name: "-80"}, fakevtgate.Shard{Keyspace: ks, Name: "80-"}
	at := fakevtgate.VGtid(ks, "-80", "MariaDB/0-1-20", "80-", "MariaDB/0-2-30")
	afterA := fakevtgate.VGtid(ks, "-80", "MariaDB/0-1-21", "80-", "MariaDB/0-2-30")
	afterB := fakevtgate.VGtid(ks, "-80", "MariaDB/0-1-21", "80-", "MariaDB/0-2-31")
	merged := fakevtgate.VGtid(ks, "0", "MariaDB/0-1-6")
	parts := []string{"-80", "80-"}
	fake.Push(fakevtgate.Script{Open: true, Batches: [][]*binlogdatapb.VEvent{
		{a.Pos(at)},
		a.JournalTxn(7, parts, "MariaDB/0-1-20", afterA, "0", "MariaDB/0-1-5"),
		b.JournalTxn(7, parts, "MariaDB/0-2-30", afterB, "0", "MariaDB/0-1-5"),
		s0.Txn(100, merged, tField, s0.Insert("t", 100, []string{"1", "a"})),
	}})
	r := open(t, c, source.NowPosition(ks))

	first := next(t, r)
	if s := entry(t, first.VGtid, "-80"); s.Incarnation != "" {
		t.Errorf("-80: %+v", s)
	}
	j := next(t, r)
	if j.Journal == nil {
		t.Fatal("no journal")
	}
	if got := j.Journal.ShardGtids[0].Gtid; got != "MariaDB/0-1-5"+position.IncarnationSep+"j1" {
		t.Errorf("the journal's target: %q, want the merged 0's incarnation", got)
	}
	next(t, r) // the second participant's journal
	txn := next(t, r)
	if s := entry(t, txn.VGtid, "0"); s.Incarnation != "j1" || s.GTID != "MariaDB/0-1-6" {
		t.Errorf("after the merge: %+v, want incarnation j1", s)
	}
	if s := entry(t, txn.VGtid, "0"); s.Covers(position.Shard{Keyspace: ks, Shard: "0", GTID: "MariaDB/0-1-3"}) {
		t.Error("the merged 0 covers a position of the first 0")
	}
}

// A reader that cannot learn an incarnation fails its attempt rather than
// hand out a position that might name the wrong shard.
func TestReaderWithoutIncarnationsHandsOutNothing(t *testing.T) {
	incs := &incarnationsOf{m: map[string]string{}, err: errors.New("store down")}
	fake, c := setup(t, source.WithIncarnations(incs.lookup))
	fake.Push(fakevtgate.Script{Batches: [][]*binlogdatapb.VEvent{
		s0.Txn(100, pos(11), tField, s0.Insert("t", 100, []string{"1", "a"})),
	}})
	r := open(t, c, source.NowPosition(ks))
	fake.Call(t, 0)
	<-fake.Call(t, 0).Done()
	if txn, ok, _ := r.TryNext(); ok && txn != nil {
		t.Fatalf("handed out %v without its incarnation", position.Of(txn.VGtid))
	}
	incs.mu.Lock()
	incs.err = nil
	incs.mu.Unlock()
	incs.set(ks+"/0", "j9")
	fake.Push(fakevtgate.Script{Open: true, Batches: [][]*binlogdatapb.VEvent{
		s0.Txn(100, pos(11), tField, s0.Insert("t", 100, []string{"1", "a"})),
	}})
	txn := next(t, r)
	if s := entry(t, txn.VGtid, "0"); s.Incarnation != "j9" {
		t.Errorf("after the retry: %+v", s)
	}
}
