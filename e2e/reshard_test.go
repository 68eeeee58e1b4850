package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
)

// reshardStep resharding customer from -> to: new shards, copy, switch,
// and complete back to back (the old shards are gone seconds later).
func reshardStep(t *testing.T, ctx context.Context, workflow, from, to string) {
	t.Helper()
	start := time.Now()
	if err := cluster.AddShards(ctx, "customer", strings.Split(to, ",")); err != nil {
		t.Fatal(err)
	}
	if err := cluster.Reshard(ctx, "customer", workflow, from, to); err != nil {
		t.Fatal(err)
	}
	if err := cluster.SwitchTraffic(ctx, "customer", workflow); err != nil {
		t.Fatal(err)
	}
	if err := cluster.Complete(ctx, "customer", workflow); err != nil {
		t.Fatal(err)
	}
	t.Logf("reshard %s -> %s switched and completed in %v", from, to, time.Since(start).Round(time.Millisecond))
}

type offline struct {
	// viaWS reads with WebSocket rather than pull: a pull subscription
	// stays parked under its cursor for a while and may follow the
	// reshard itself, which is not the case these clients test.
	viaWS  bool
	name   string
	stream string
	sub    string // "" for an anonymous token holder
	cursor string
	since  int // index in the writer's rows of the first row it must get
}

// park makes a subscriber read everything written so far (up to the rows
// the writer inserted) and ack it, then go away.
func park(t *testing.T, ctx context.Context, g *gateway, w *writer, o *offline) {
	t.Helper()
	want := w.since(o.since)
	connect := connectPull
	if o.viaWS {
		connect = connectWS
	}
	c, err := connect(ctx, g, o.stream, o.sub, o.cursor)
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	var last string
	got, err := readTo(ctx, c, want, newReadEnd(1), lastChange(&last))
	if err != nil {
		t.Fatalf("%s: %v", o.name, err)
	}
	checkExactlyOnce(t, o.name+" before going away", got, want)
	o.cursor = last
	if o.sub != "" {
		if err := c.ack(ctx, o.cursor); err != nil {
			t.Fatal(err)
		}
	}
	o.since = len(w.since(0))
}

// lastChange keeps in last the cursor of the latest change event read,
// end markers included: a client acks (or resumes from) what it has read.
func lastChange(last *string) func(ev) {
	return func(e ev) {
		if e.Type == "change" {
			*last = e.Cursor
		}
	}
}

// comeBack reconnects and checks every row since the last ack arrives once.
func comeBack(t *testing.T, ctx context.Context, g *gateway, w *writer, o *offline) time.Duration {
	t.Helper()
	want := w.since(o.since)
	start := time.Now()
	cursor := o.cursor
	if o.sub != "" {
		cursor = ""
	}
	c, err := connectPull(ctx, g, o.stream, o.sub, cursor)
	if err != nil {
		t.Fatal(err)
	}
	first := time.Duration(0)
	var last string
	track := lastChange(&last)
	got, err := readTo(ctx, c, want, newReadEnd(1), func(e ev) {
		if first == 0 {
			first = time.Since(start)
		}
		track(e)
	})
	if err != nil {
		t.Fatalf("%s: %v", o.name, err)
	}
	checkExactlyOnce(t, o.name+" after coming back", got, want)
	o.cursor = last
	if o.sub != "" {
		if err := c.ack(ctx, o.cursor); err != nil {
			t.Fatal(err)
		}
	}
	o.since = len(w.since(0))
	t.Logf("%s: %d rows exactly once; first event %v after reconnect", o.name, len(got), first.Round(time.Millisecond))
	return first
}

type reshardsReport struct {
	Reshards []reshardReport `json:"reshards"`
}

type reshardReport struct {
	Journal string   `json:"journal"`
	From    []string `json:"from"`
	To      []string `json:"to"`
	Bridges []struct {
		Stream, Subscriber, State, Error string
		Events, Bytes                    int
		Started, Finished                time.Time
	} `json:"bridges"`
	Blocking []struct{ Stream, Subscriber string } `json:"blocking_subscribers"`
	Safe     bool                                  `json:"safe_to_complete"`
}

func getReshards(t *testing.T, ctx context.Context, g *gateway) reshardsReport {
	t.Helper()
	var r reshardsReport
	if st, err := g.do(ctx, "GET", "/v1/reshards", nil, &r); err != nil || st != 200 {
		t.Fatalf("GET /v1/reshards: %d %v", st, err)
	}
	return r
}

// waitBridged waits until the journal from -> to is recorded and its
// bridges are finished, and reports bridge throughput.
func waitBridged(t *testing.T, ctx context.Context, g *gateway, from, to string) {
	t.Helper()
	var done *reshardReport
	eventually(t, 3*time.Minute, fmt.Sprintf("reshard %s -> %s recorded with its bridges done", from, to), func() error {
		var r reshardsReport
		if st, err := g.do(ctx, "GET", "/v1/reshards", nil, &r); err != nil || st != 200 {
			return fmt.Errorf("GET /v1/reshards: %d %v", st, err)
		}
		// Newest first: a reshard done again later has the same shards.
		for i := len(r.Reshards) - 1; i >= 0; i-- {
			rs := r.Reshards[i]
			if strings.Join(rs.From, ",") != from || strings.Join(rs.To, ",") != to {
				continue
			}
			for _, b := range rs.Bridges {
				if b.State == "in_progress" {
					return fmt.Errorf("bridge %s/%s in progress", b.Stream, b.Subscriber)
				}
			}
			if len(rs.Blocking) > 0 {
				return fmt.Errorf("blocking subscribers %+v", rs.Blocking)
			}
			done = &rs
			return nil
		}
		return fmt.Errorf("not recorded: %+v", r)
	})
	for _, b := range done.Bridges {
		if b.State == "failed" {
			t.Errorf("bridge %s/%s failed: %s", b.Stream, b.Subscriber, b.Error)
		}
		if b.Events > 0 {
			d := b.Finished.Sub(b.Started)
			t.Logf("bridge %s -> %s %s/%s: %d events, %d bytes (%.0f B/event) in %v = %.0f events/s",
				from, to, b.Stream, b.Subscriber, b.Events, b.Bytes, float64(b.Bytes)/float64(b.Events), d.Round(time.Millisecond), float64(b.Events)/d.Seconds())
		}
	}
}

// TestReshardLifecycle takes customer through 0 -> -80,80- -> four shards
// -> 0, each reshard switched and completed back to back, with subscribers
// away across them: every one resumes with nothing lost or repeated, or is
// told exactly why it cannot.
func TestReshardLifecycle(t *testing.T) {
	needE2E(t)
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	freshCluster(t, ctx)
	// A ring shorter than the backlog below: the anonymous token from
	// before the cutover must be outside it to test the resync path (a
	// cursor the ring still covers is served exactly, see TestFanOut*),
	// and the subscribers coming back catch up on VStreams of their own.
	g := startGateway(t, append(withRedis(t), "--ring-entries", "500")...)
	w := newWriter(t, "rs"+strconv.FormatInt(time.Now().UnixNano()%1e6, 10))
	suffix := strconv.FormatInt(time.Now().UnixNano()%1e6, 10)
	stream := "rs-" + suffix
	failStream := "rs-fail-" + suffix
	g.createStream(t, map[string]any{"name": stream, "keyspace": "customer", "tables": []string{"customer"}})
	g.createStream(t, map[string]any{"name": failStream, "keyspace": "customer", "tables": []string{"customer"}, "on_gap": "fail"})

	behind := &offline{name: "named, behind the cutover", stream: stream, sub: "behind"}
	atCut := &offline{name: "named, acked at the cutover", stream: stream, sub: "atcut"}
	chain := &offline{name: "named, away for two reshards", stream: stream, sub: "chain"}
	merge := &offline{name: "named, away for split and merge", stream: stream, sub: "merge"}
	anon := &offline{name: "anonymous token", stream: stream, viaWS: true}
	anonFail := &offline{name: "anonymous token, on_gap=fail", stream: failStream, viaWS: true}
	all := []*offline{behind, atCut, chain, merge, anon, anonFail}
	for _, o := range all {
		o.cursor = initialCursor(t, ctx, g, o.stream)
		if o.sub != "" {
			if st, err := g.do(ctx, "POST", "/v1/streams/"+o.stream+"/subscribers/"+o.sub+"/ack", map[string]string{"cursor": o.cursor}, &map[string]any{}); err != nil || st != 200 {
				t.Fatalf("ack: %d %v", st, err)
			}
		}
	}
	if err := w.insert(ctx, "p0", 50); err != nil {
		t.Fatal(err)
	}
	for _, o := range all {
		park(t, ctx, g, w, o)
	}
	// A client that stays connected sees the cutover as a reshard event;
	// so does one reading the Debezium format (DESIGN §3.2), with the same
	// rows.
	live, err := connectWS(ctx, g, stream, "", atCut.cursor)
	if err != nil {
		t.Fatal(err)
	}
	defer live.close()
	liveDbz, err := connectWSWith(ctx, g, stream, "", atCut.cursor, url.Values{"format": {"debezium"}})
	if err != nil {
		t.Fatal(err)
	}
	defer liveDbz.close()

	// Backlog for the subscribers behind the cutover, then atCut catches up
	// to the last write before the switch.
	if err := w.insert(ctx, "backlog", 2000); err != nil {
		t.Fatal(err)
	}
	park(t, ctx, g, w, atCut)

	reshardStep(t, ctx, "split2", "0", "-80,80-")
	waitBridged(t, ctx, g, "0", "-80,80-")
	if err := w.insert(ctx, "after-split2", 40); err != nil {
		t.Fatal(err)
	}
	if err := w.insert(ctx, "sentinel1", sentinels); err != nil {
		t.Fatal(err)
	}

	// The connected client: every row once, and a reshard event 0 -> -80,80-.
	liveWant := w.since(atCut.since - 2000)
	for name, c := range map[string]client{"live client": live, "live client, format=debezium": liveDbz} {
		sawReshard := false
		liveGot, err := readTo(ctx, c, liveWant, newReadEnd(1), func(e ev) {
			if e.Type != "reshard" {
				return
			}
			var r struct{ From, To []string }
			if err := json.Unmarshal(e.Raw, &r); err != nil {
				t.Errorf("%s: reshard event %s: %v", name, e.Raw, err)
			}
			t.Logf("%s got reshard event %v -> %v", name, r.From, r.To)
			sawReshard = strings.Join(r.From, ",") == "0" && strings.Join(r.To, ",") == "-80,80-"
		})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		checkExactlyOnce(t, name, liveGot, liveWant)
		if !sawReshard {
			t.Errorf("%s did not get a reshard event for 0 -> -80,80-", name)
		}
	}

	comeBack(t, ctx, g, w, behind)
	comeBack(t, ctx, g, w, atCut)

	// An anonymous token from before the cutover cannot be resumed exactly.
	resyncCheck(t, ctx, g, w, anon)
	failCheck(t, ctx, g, anonFail)

	// Second reshard while chain and merge stay away.
	if err := w.insert(ctx, "before-split4", 100); err != nil {
		t.Fatal(err)
	}
	reshardStep(t, ctx, "split4", "-80,80-", "-40,40-80,80-c0,c0-")
	waitBridged(t, ctx, g, "-80,80-", "-40,40-80,80-c0,c0-")
	if err := w.insert(ctx, "after-split4", 40); err != nil {
		t.Fatal(err)
	}
	if err := w.insert(ctx, "sentinel2", sentinels); err != nil {
		t.Fatal(err)
	}
	comeBack(t, ctx, g, w, chain)

	// Merge back to one shard while merge stays away.
	if err := w.insert(ctx, "before-merge", 100); err != nil {
		t.Fatal(err)
	}
	reshardStep(t, ctx, "merge1", "-40,40-80,80-c0,c0-", "0")
	waitBridged(t, ctx, g, "-40,40-80,80-c0,c0-", "0")
	if err := w.insert(ctx, "after-merge", 40); err != nil {
		t.Fatal(err)
	}
	if err := w.insert(ctx, "sentinel3", sentinels); err != nil {
		t.Fatal(err)
	}
	comeBack(t, ctx, g, w, merge)
	comeBack(t, ctx, g, w, chain)
	// The merge created a shard 0 again, on the tablet alias of the 0
	// deleted by the first split: a new shard, not a reparent of the old
	// one (taken for one, every VStream of the keyspace was reopened in
	// the middle of the merge's cutover, and the journal watcher missed
	// the merge's journal).
	if strings.Contains(g.log.String(), "shard primary changed") {
		t.Errorf("a shard created by a reshard was taken for a reparent:\n%s", g.notable(20))
	}
}

// resyncCheck: a pre-reshard anonymous token after complete gets a resync
// event, then a snapshot equal to SELECT of the table, then live changes.
func resyncCheck(t *testing.T, ctx context.Context, g *gateway, w *writer, o *offline) {
	t.Helper()
	start := time.Now()
	c, err := connectPull(ctx, g, o.stream, "", o.cursor)
	if err != nil {
		t.Fatal(err)
	}
	e, err := c.next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if e.Type != "resync" {
		t.Fatalf("%s: first event is %s, want resync: %s", o.name, e.Type, e.Raw)
	}
	t.Logf("%s: resync after %v: %s", o.name, time.Since(start).Round(time.Millisecond), e.Raw)
	snap := map[string]int{}
	for {
		e, err := c.next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if e.Type == "snapshot_complete" {
			break
		}
		if e.Type == "change" {
			if e.Op != "snapshot" {
				t.Fatalf("%s: %s before snapshot_complete", o.name, e.Op)
			}
			snap[string(e.After["customer_id"])]++
		}
	}
	want := customerIDs(t, ctx)
	if len(snap) != len(want) {
		t.Errorf("%s: snapshot has %d distinct rows, table has %d", o.name, len(snap), len(want))
	}
	for _, id := range want {
		if snap[id] != 1 {
			t.Errorf("%s: customer_id %s appears %d times in the snapshot", o.name, id, snap[id])
			break
		}
	}
	t.Logf("%s: snapshot of %d rows equals the table", o.name, len(snap))
	// Then live changes.
	n := len(w.since(0))
	if err := w.insert(ctx, "after-resync", 1); err != nil {
		t.Fatal(err)
	}
	got, err := readUntil(ctx, c, w.since(n))
	if err != nil {
		t.Fatal(err)
	}
	checkExactlyOnce(t, o.name+" live after resync", got, w.since(n))
}

// failCheck: with on_gap=fail the same situation is a clear 409. A pull
// subscription parked under the token may still be reading the old shard
// when it is deleted; it then delivers what it read and the next request
// gets the 409 — never a silent skip.
func failCheck(t *testing.T, ctx context.Context, g *gateway, o *offline) {
	t.Helper()
	cursor := o.cursor
	for range 50 {
		var out struct {
			NextCursor string `json:"next_cursor"`
			Error      struct{ Code, Message string }
		}
		st, err := g.do(ctx, "GET", "/v1/streams/"+o.stream+"/changes?limit=10000&cursor="+url.QueryEscape(cursor), nil, &out)
		if err != nil {
			t.Fatal(err)
		}
		if st == http.StatusOK {
			cursor = out.NextCursor
			continue
		}
		if st != http.StatusConflict || out.Error.Code != "resume_impossible" || !strings.Contains(out.Error.Message, "customer/0") {
			t.Fatalf("%s: want 409 resume_impossible naming customer/0, got %d %+v", o.name, st, out)
		}
		t.Logf("%s: %d %s: %s", o.name, st, out.Error.Code, out.Error.Message)
		return
	}
	t.Fatalf("%s: no 409 after 50 pages", o.name)
}
