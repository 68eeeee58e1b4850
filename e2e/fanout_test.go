package e2e

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/vstream-gateway/vstream-gateway/internal/wait"
)

// dumpThreads sums the binlog dump threads on customer's primaries: one per
// VStream reading each shard.
func dumpThreads(t *testing.T, ctx context.Context) (int, map[string]int) {
	t.Helper()
	per, err := cluster.BinlogDumpThreads(ctx, "customer")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, k := range per {
		n += k
	}
	return n, per
}

// fanReader is one connected reader and what it got.
type fanReader struct {
	name     string
	c        client
	got      []ev
	reshards int
	err      error
}

// readAll reads until every row of want it does not have yet arrived (and
// to end's markers: see readUntil), counting reshard events.
func (r *fanReader) readAll(ctx context.Context, want []string, end *readEnd) {
	had := map[string]bool{}
	for _, e := range r.got {
		had[e.str("email")] = true
	}
	var rest []string
	for _, e := range want {
		if !had[e] {
			rest = append(rest, e)
		}
	}
	got, err := readTo(ctx, r.c, rest, end, func(e ev) {
		if e.Type == "reshard" {
			r.reshards++
		}
	})
	r.got = append(r.got, got...)
	r.err = err
}

// One tail serves every reader of a stream: the binlog dump threads on the
// primary do not grow with the audience, and every reader, on every
// transport, gets every row exactly once and in order per shard, across a
// reshard made while they read. A reader whose cursor was minted by
// another gateway process (which interleaves the shards its own way) joins
// per shard and gets exactly the rows that cursor lacks.
func TestFanOutSharedTail(t *testing.T) {
	needE2E(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	freshCluster(t, ctx)
	suffix := strconv.FormatInt(time.Now().UnixNano()%1e6, 10)
	// Every reader here is anonymous: one token subject.
	unlimited := append(withRedis(t), "--max-conns-per-token", "0")
	g := startGateway(t, unlimited...)
	w := newWriter(t, "fo"+suffix)
	stream := "fan-" + suffix
	g.createStream(t, map[string]any{"name": stream, "keyspace": "customer", "tables": []string{"customer"}})

	// Written rows make MariaDB drop dump threads of VStreams that ended
	// (earlier tests'): they linger until their next write.
	if err := w.insert(ctx, "warm", 5); err != nil {
		t.Fatal(err)
	}
	start := initialCursor(t, ctx, g, stream) // starts the stream's tail
	from := len(w.since(0))

	// A second gateway process reads the same stream from the same cursor
	// (its own tail, its own interleaving of the shards later on).
	g2 := startGateway(t, unlimited...)
	other, err := connectWS(ctx, g2, stream, "", start)
	if err != nil {
		t.Fatal(err)
	}
	defer other.close()
	o := &fanReader{name: "other gateway", c: other}
	if err := w.insert(ctx, "warm2", 5); err != nil {
		t.Fatal(err)
	}
	o.readAll(ctx, w.since(from), newReadEnd(1))
	if o.err != nil {
		t.Fatal(o.err)
	}
	// Ended VStreams' dump threads (a catch-up that joined its tail) go
	// at the shard's next write. One tail per gateway, and nothing more:
	// the journal watcher (one of the two gateways holds its lease) rides
	// its gateway's tail instead of a VStream of its own.
	flushes := 0
	eventually(t, time.Minute, "one binlog dump thread per gateway (the journal watcher riding a tail)", func() error {
		flushes++
		if err := w.insert(ctx, "flush"+strconv.Itoa(flushes), 1); err != nil {
			return err
		}
		if n, per := dumpThreads(t, ctx); n != 2 {
			return fmt.Errorf("%d binlog dump threads on customer (%v), want 2", n, per)
		}
		return nil
	})
	base, _ := dumpThreads(t, ctx)

	counts := map[string]int{"ws": 180, "sse": 10, "pull": 10}
	var readers []*fanReader
	for tr, n := range counts {
		for i := range n {
			c, err := transports[tr](ctx, g, stream, "", start)
			if err != nil {
				t.Fatal(err)
			}
			defer c.close()
			readers = append(readers, &fanReader{name: fmt.Sprintf("%s-%d", tr, i), c: c})
		}
	}
	if err := w.insert(ctx, "p1", 100); err != nil {
		t.Fatal(err)
	}
	during, _ := dumpThreads(t, ctx)
	t.Logf("binlog dump threads on customer: %d with one reader per gateway, %d with %d more readers", base, during, len(readers))
	if during > base {
		t.Errorf("%d readers raised the binlog dump threads from %d to %d: readers are not sharing the tail", len(readers), base, during)
	}

	// Reshard while everyone reads; rows keep coming while the new shards
	// are copied (not across the switch itself, where vtgate may fail a
	// write without saying whether it committed).
	if err := cluster.AddShards(ctx, "customer", []string{"-80", "80-"}); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := w.insert(ctx, "during", 5); err != nil {
				t.Errorf("writer: %v", err)
				return
			}
		}
	}()
	if err := cluster.Reshard(ctx, "customer", "fanout2", "0", "-80,80-"); err != nil {
		t.Fatal(err)
	}
	close(stop)
	wg.Wait()
	if err := cluster.SwitchTraffic(ctx, "customer", "fanout2"); err != nil {
		t.Fatal(err)
	}
	if err := cluster.Complete(ctx, "customer", "fanout2"); err != nil {
		t.Fatal(err)
	}
	if err := w.insert(ctx, "after", 60); err != nil {
		t.Fatal(err)
	}

	// Rows on both shards; the second gateway's cursor mid-way is resumed
	// on the first.
	midFrom := len(w.since(0))
	if err := w.insert(ctx, "two-shards", 80); err != nil {
		t.Fatal(err)
	}
	if err := w.insert(ctx, "sentinel", sentinels); err != nil {
		t.Fatal(err)
	}
	all := w.since(from)
	o.readAll(ctx, all, newReadEnd(1))
	if o.err != nil {
		t.Fatal(o.err)
	}
	checkExactlyOnce(t, o.name, o.got, all)
	// The cursor after the 40th row of the two-shard phase, in g2's order.
	var seen []ev
	cut := ""
	for _, e := range o.got {
		seen = append(seen, e)
		if idx := indexOf(w.since(0), e.str("email")); idx >= midFrom+40 && cut == "" {
			cut = e.Cursor
			break
		}
	}
	if cut == "" {
		t.Fatal("no cursor in the two-shard phase")
	}
	had := map[string]bool{}
	for _, e := range seen {
		had[e.str("email")] = true
	}
	var rest []string
	for _, e := range all {
		if !had[e] {
			rest = append(rest, e)
		}
	}
	joiner, err := connectWS(ctx, g, stream, "", cut)
	if err != nil {
		t.Fatal(err)
	}
	defer joiner.close()
	readers = append(readers, &fanReader{name: "cursor from the other gateway", c: joiner})

	end := newReadEnd(len(readers))
	var rg sync.WaitGroup
	for _, r := range readers {
		rg.Add(1)
		go func() {
			defer rg.Done()
			want := all
			if r.c == joiner {
				want = rest
			}
			r.readAll(ctx, want, end)
		}()
	}
	rg.Wait()
	for _, r := range readers {
		if r.err != nil {
			t.Errorf("%s: %v", r.name, r.err)
			continue
		}
		want := all
		if r.c == joiner {
			want = rest
		} else if r.reshards != 1 {
			t.Errorf("%s: %d reshard events, want 1", r.name, r.reshards)
		}
		checkExactlyOnce(t, r.name, r.got, want)
	}
	// Each shard: the journal watcher and the tails of the two gateways.
	// Dump threads of VStreams that ended (the reshard's reverse
	// workflow, a catch-up that joined) go at their shard's next write:
	// write until they have.
	over := ""
	err = eventuallyCtx(ctx, 30*time.Second, "at most 3 binlog dump threads per shard", func() error {
		if err := w.insert(ctx, "flush", 4); err != nil {
			return wait.Abort(err)
		}
		after, per := dumpThreads(t, ctx)
		for shard, n := range per {
			if n > 3 {
				over = shard
				return fmt.Errorf("shard %s keeps %d binlog dump threads with %d readers (total %d)", shard, n, len(readers)+1, after)
			}
		}
		t.Logf("binlog dump threads after the reshard, per shard: %v", per)
		return nil
	})
	if err != nil {
		info, _ := cluster.BinlogDumpThreadInfo(ctx, "customer")
		t.Fatalf("%v: %v", err, info[over])
	}
}

func indexOf(list []string, s string) int {
	for i, x := range list {
		if x == s {
			return i
		}
	}
	return -1
}
