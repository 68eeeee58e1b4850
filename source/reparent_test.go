package source_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"testing"
	"time"

	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"

	"github.com/vstream-gateway/vstream-gateway/internal/fakevtgate"
	"github.com/vstream-gateway/vstream-gateway/internal/syncbuf"
	"github.com/vstream-gateway/vstream-gateway/metrics"
	"github.com/vstream-gateway/vstream-gateway/source"
)

const primaryPoll = 50 * time.Millisecond

// reparentSetup starts a fake vtgate whose shard 0 has primary zone1-100,
// and a client watching primaries every primaryPoll that logs into logs.
func reparentSetup(t *testing.T, opts ...source.Option) (*fakevtgate.Server, *source.Client, *syncbuf.Buffer) {
	t.Helper()
	logs := &syncbuf.Buffer{}
	fake := fakevtgate.New(t)
	fake.SetCreateTable("t", tText)
	fake.SetTablets(fakevtgate.Tablet{Keyspace: ks, Shard: "0", Alias: "zone1-0000000100", TermStart: time.Unix(1000, 0)})
	c := dial(t, fake, append([]source.Option{source.WithPrimaryPoll(primaryPoll), source.WithMaxRetryWait(100 * time.Millisecond),
		source.WithLogger(slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))}, opts...)...)
	t.Cleanup(c.Close)
	return fake, c, logs
}

// polled waits until the watch has asked vtgate for the primaries n more
// times: after that it knows the current answer.
func polled(t *testing.T, fake *fakevtgate.Server, n int) {
	t.Helper()
	count := func() int {
		k := 0
		for _, q := range fake.Queries() {
			if q.SQL == "show vitess_tablets" {
				k++
			}
		}
		return k
	}
	want := count() + n
	waitFor(t, "the primary watch to poll", func() bool { return count() >= want })
}

func promote(fake *fakevtgate.Server, alias string, term time.Time) {
	fake.SetTablets(fakevtgate.Tablet{Keyspace: ks, Shard: "0", Alias: alias, TermStart: term},
		// The old primary still reports itself PRIMARY, with its old
		// term, as a vttablet whose mysqld died does.
		fakevtgate.Tablet{Keyspace: ks, Shard: "0", Alias: "zone1-0000000100", TermStart: time.Unix(1000, 0)})
}

func reparents(t *testing.T, shard string) float64 {
	t.Helper()
	mfs, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "vsg_upstream_reparents_total" {
			continue
		}
		for _, m := range mf.Metric {
			lbl := map[string]string{}
			for _, l := range m.Label {
				lbl[l.GetName()] = l.GetValue()
			}
			if lbl["keyspace"] == ks && lbl["shard"] == shard {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// After an emergency reparent vtgate keeps reading the shard from the old
// primary's vttablet, which sends nothing more — here it stops in the
// middle of a transaction. When the watch sees the new primary the
// stream is cancelled and reopened from the last whole transaction; the
// cut transaction comes once, whole, from the new stream. The change is
// logged with both primaries, counted per shard, and the outage is
// measured from the shard's last event, not from the detection.
func TestReparentReopensStream(t *testing.T) {
	fake, c, logs := reparentSetup(t)
	before := reparents(t, "0")
	sp := spec
	sp.Name = fmt.Sprintf("reparent-test-%d", time.Now().UnixNano()) // its own metrics per run (-count)
	fake.Push(cutMidTransaction()...)
	r := c.Open(context.Background(), sp, pos(10))
	t.Cleanup(r.Close)
	samePos(t, "before the reparent", next(t, r).VGtid, pos(11))
	lastEvent := time.Now()
	polled(t, fake, 2) // the watch knows zone1-100
	const silence = 300 * time.Millisecond
	time.Sleep(silence - time.Since(lastEvent)) // the shard's silence is the scenario
	promote(fake, "zone1-0000000101", time.Now())

	select {
	case <-fake.Call(t, 0).Done():
	case <-time.After(fakevtgate.Timeout):
		t.Fatal("the stream on the old primary was not cancelled")
	}
	samePos(t, "reopened from", fake.Call(t, 1).Req.Vgtid, pos(11))
	txn := next(t, r)
	samePos(t, "after the reparent", txn.VGtid, pos(12))
	if got := summary(t, txn); got != `insert {"id":2,"doc":"b"}` {
		t.Fatalf("the cut transaction: %s", got)
	}

	waitFor(t, "the end of the outage to be logged", func() bool { return strings.Contains(logs.String(), "upstream available again") })
	if !regexp.MustCompile(`level=WARN msg="shard primary changed; reopening its VStreams from their last transaction" keyspace=customer shard=0 old_primary=zone1-0000000100 new_primary=zone1-0000000101 .*silent_for=\S+ reopened=1`).MatchString(logs.String()) {
		t.Errorf("no reparent warning:\n%s", logs)
	}
	m := regexp.MustCompile(`upstream available again.* unavailable_for=(\S+)`).FindStringSubmatch(logs.String())
	if d, err := time.ParseDuration(m[1]); err != nil || d < silence {
		t.Errorf("logged outage %q, want at least the shard's silence %v", m[1], silence)
	}
	if v := reparents(t, "0") - before; v != 1 {
		t.Errorf("vsg_upstream_reparents_total{shard=0} grew by %v, want 1", v)
	}
	if n, sum := histogram(t, "vsg_upstream_outage_seconds", sp.Name); n != 1 || sum < silence.Seconds() {
		t.Errorf("vsg_upstream_outage_seconds: %d observations, sum %v; want 1 of at least %v", n, sum, silence.Seconds())
	}
}

// The cancel ends only the wait for vtgate: transactions being handed to a
// consumer that does not read when the primary changes are delivered all
// the same, and the stream reopens after the last of them — nothing lost,
// nothing repeated.
func TestReparentKeepsDelivery(t *testing.T) {
	fake, c, _ := reparentSetup(t, source.WithQueue(1))
	fake.Push(fakevtgate.Script{Open: true, Batches: [][]*binlogdatapb.VEvent{
		s0.Txn(100, pos(11), tField, s0.Insert("t", 100, []string{"1", "a"})),
		s0.Txn(101, pos(12), tField, s0.Insert("t", 101, []string{"2", "b"})),
		s0.Txn(102, pos(13), tField, s0.Insert("t", 102, []string{"3", "c"})),
	}}, fakevtgate.Script{Open: true, Batches: [][]*binlogdatapb.VEvent{
		s0.Txn(103, pos(14), tField, s0.Insert("t", 103, []string{"4", "d"})),
	}})
	r := open(t, c, pos(10))
	waitFor(t, "the reader to fill its queue", func() bool { return r.Buffered() == 1 })
	polled(t, fake, 2)
	promote(fake, "zone1-0000000101", time.Now())
	select {
	case <-fake.Call(t, 0).Done():
	case <-time.After(fakevtgate.Timeout):
		t.Fatal("the stream on the old primary was not cancelled")
	}
	for i := 11; i <= 14; i++ {
		samePos(t, "in order, once", next(t, r).VGtid, pos(i))
	}
	samePos(t, "reopened from", fake.Call(t, 1).Req.Vgtid, pos(13))
	if n := fake.Calls(); n != 2 {
		t.Fatalf("%d VStream calls, want 2", n)
	}
}

// A stream that already has a transaction the new primary committed (vtgate
// moved it by itself, as after a planned reparent) is left alone, and so
// is a stream that does not read the shard; the change is still logged
// and counted.
func TestReparentAlreadyFollowed(t *testing.T) {
	fake, c, logs := reparentSetup(t)
	term := time.Unix(2000, 0)
	fake.SetTablets(fakevtgate.Tablet{Keyspace: ks, Shard: "0", Alias: "zone1-0000000100", TermStart: time.Unix(1000, 0)},
		fakevtgate.Tablet{Keyspace: ks, Shard: "1", Alias: "zone1-0000000200", TermStart: time.Unix(1000, 0)})
	before0, before1 := reparents(t, "0"), reparents(t, "1")
	fake.Push(fakevtgate.Script{Open: true, Batches: [][]*binlogdatapb.VEvent{
		s0.Txn(term.Unix()+1, pos(11), tField, s0.Insert("t", term.Unix()+1, []string{"1", "a"})),
	}})
	r := open(t, c, pos(10))
	next(t, r)
	polled(t, fake, 2)
	fake.SetTablets(fakevtgate.Tablet{Keyspace: ks, Shard: "0", Alias: "zone1-0000000101", TermStart: term},
		fakevtgate.Tablet{Keyspace: ks, Shard: "1", Alias: "zone1-0000000201", TermStart: term})
	waitFor(t, "both changes to be counted", func() bool { return reparents(t, "0") > before0 && reparents(t, "1") > before1 })
	polled(t, fake, 2)
	if n := fake.Calls(); n != 1 {
		t.Fatalf("%d VStream calls: a stream that follows the new primary was reopened", n)
	}
	for _, sh := range []string{"0", "1"} {
		if !regexp.MustCompile(`msg="shard primary changed; reopening its VStreams from their last transaction" keyspace=customer shard=` + sh + ` .* reopened=0`).MatchString(logs.String()) {
			t.Errorf("shard %s: no reparent line with reopened=0:\n%s", sh, logs)
		}
	}
}

// Primaries picks, of two tablets reporting PRIMARY for a shard, the one
// with the later term, as vtgate does; replicas and other keyspaces are
// not primaries of the keyspaces asked about.
func TestPrimaries(t *testing.T) {
	fake, c := setup(t)
	fake.SetTablets(
		fakevtgate.Tablet{Keyspace: ks, Shard: "-80", Alias: "zone1-0000000300", TermStart: time.Unix(3000, 0)},
		fakevtgate.Tablet{Keyspace: ks, Shard: "-80", Alias: "zone1-0000000301", TermStart: time.Unix(3500, 0)},
		fakevtgate.Tablet{Keyspace: ks, Shard: "-80", Type: "REPLICA", Alias: "zone1-0000000302"},
		fakevtgate.Tablet{Keyspace: ks, Shard: "80-", Alias: "zone1-0000000400"},
		fakevtgate.Tablet{Keyspace: "commerce", Shard: "0", Alias: "zone1-0000000100"},
	)
	got, err := c.Primaries(context.Background(), map[string]bool{ks: true})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]source.Primary{
		ks + "/-80": {Alias: "zone1-0000000301", TermStart: time.Unix(3500, 0).UTC()},
		ks + "/80-": {Alias: "zone1-0000000400"},
	}
	if len(got) != len(want) {
		t.Fatalf("primaries %v, want %v", got, want)
	}
	for k, w := range want {
		if g := got[k]; g.Alias != w.Alias || !g.TermStart.Equal(w.TermStart) {
			t.Errorf("%s: %+v, want %+v", k, g, w)
		}
	}
}

// When vtgate gives up on one shard's tablet first (`persistent error in
// vstream for ks/shard on tablet …`), the outage counts from that shard's
// last event, not from the last thing vtgate sent: here heartbeats (other
// shards, in a real stream) kept the stream busy while the shard was
// silent.
func TestShardFailureOutageFromShardSilence(t *testing.T) {
	logs := &syncbuf.Buffer{}
	fake := fakevtgate.New(t)
	fake.SetCreateTable("t", tText)
	c := dial(t, fake, source.WithMaxRetryWait(100*time.Millisecond),
		source.WithLogger(slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	t.Cleanup(c.Close)
	sp := spec
	sp.Name = "shard-failure-test"
	fake.Push(fakevtgate.Script{Open: true, Batches: [][]*binlogdatapb.VEvent{
		s0.Txn(100, pos(11), tField, s0.Insert("t", 100, []string{"1", "a"})),
	}}, fakevtgate.Script{Open: true, Batches: [][]*binlogdatapb.VEvent{
		s0.Txn(101, pos(12), tField, s0.Insert("t", 101, []string{"2", "b"})),
	}})
	r := c.Open(context.Background(), sp, pos(10))
	t.Cleanup(r.Close)
	next(t, r)
	lastEvent := time.Now()
	call := fake.Call(t, 0)
	const silence = 300 * time.Millisecond
	for time.Since(lastEvent) < silence {
		call.Answer(t, fakevtgate.Script{Open: true, Batches: [][]*binlogdatapb.VEvent{{fakevtgate.Heartbeat()}}})
		if hb := next(t, r); !hb.Heartbeat {
			t.Fatalf("want a heartbeat, got %+v", hb)
		}
		time.Sleep(50 * time.Millisecond) // vtgate's heartbeat interval is the scenario
	}
	call.Answer(t, fakevtgate.Script{Err: errors.New(`error starting stream from shard GTID keyspace:"customer" shard:"0" gtid:"MariaDB/0-1-11": ` +
		`persistent error in vstream for customer/0 on tablet zone1-0000000100; giving up: vttablet: connection refused`)})
	samePos(t, "after the failure", next(t, r).VGtid, pos(12))
	waitFor(t, "the end of the outage to be logged", func() bool { return strings.Contains(logs.String(), "upstream available again") })
	m := regexp.MustCompile(`upstream available again.* unavailable_for=(\S+)`).FindStringSubmatch(logs.String())
	if d, err := time.ParseDuration(m[1]); err != nil || d < silence {
		t.Errorf("logged outage %q, want at least the shard's silence %v", m[1], silence)
	}
}

// A reshard deletes shard 0 and a later merge creates a shard 0 again, on
// the same tablet alias in a new term: a new shard, not a reparent of the
// old one, so nothing is counted, logged or reopened. A shard missing from
// a single answer (a planned reparent's moment between demotion and
// promotion) is still remembered: its new primary is a reparent.
func TestPrimaryWatchForgetsDeletedShards(t *testing.T) {
	// Polls far enough apart that the single answer without shard 0
	// stays single on a busy machine.
	fake, c, logs := reparentSetup(t, source.WithPrimaryPoll(300*time.Millisecond))
	sp := spec
	sp.Name = fmt.Sprintf("reused-shard-%d", time.Now().UnixNano())
	fake.Push(fakevtgate.Script{Open: true, Batches: [][]*binlogdatapb.VEvent{
		s0.Txn(100, pos(11), tField, s0.Insert("t", 100, []string{"1", "a"})),
	}})
	r := c.Open(context.Background(), sp, fakevtgate.VGtid(ks, "", ""))
	t.Cleanup(r.Close)
	next(t, r)
	before := reparents(t, "0")
	polled(t, fake, 2) // the watch knows zone1-100 in shard 0

	// The split: shard 0 is gone, -80 and 80- serve.
	fake.SetTablets(fakevtgate.Tablet{Keyspace: ks, Shard: "-80", Alias: "zone1-0000000300", TermStart: time.Unix(1100, 0)},
		fakevtgate.Tablet{Keyspace: ks, Shard: "80-", Alias: "zone1-0000000400", TermStart: time.Unix(1100, 0)})
	polled(t, fake, 4)
	// The merge back: a new shard 0 on the old alias, in a new term.
	fake.SetTablets(fakevtgate.Tablet{Keyspace: ks, Shard: "0", Alias: "zone1-0000000100", TermStart: time.Unix(1200, 0)})
	polled(t, fake, 2)
	if v := reparents(t, "0") - before; v != 0 {
		t.Errorf("a shard 0 created again was counted as %v reparent(s)", v)
	}
	if strings.Contains(logs.String(), "shard primary changed") {
		t.Errorf("a shard 0 created again was logged as a reparent:\n%s", logs)
	}
	if n := fake.Calls(); n != 1 {
		t.Errorf("%d VStream calls: the stream was reopened for a new shard", n)
	}

	// One answer without a primary for shard 0, then another primary: a
	// reparent all the same.
	fake.SetTablets()
	polled(t, fake, 1)
	fake.SetTablets(fakevtgate.Tablet{Keyspace: ks, Shard: "0", Alias: "zone1-0000000101", TermStart: time.Unix(1300, 0)})
	waitFor(t, "the reparent to be counted", func() bool { return reparents(t, "0")-before == 1 })
}
