package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// movesReport is the part of GET /v1/reshards about MoveTables cutovers.
type movesReport struct {
	Reshards []struct {
		Type           string    `json:"type"`
		Keyspace       string    `json:"keyspace"`
		TargetKeyspace string    `json:"target_keyspace"`
		Tables         []string  `json:"tables"`
		SeenAt         time.Time `json:"seen_at"`
		Bridges        []struct {
			Stream, Subscriber, State, Error string
			Events                           int
		} `json:"bridges"`
		Blocking []struct{ Stream, Subscriber, Reason string } `json:"blocking_subscribers"`
		Safe     bool                                          `json:"safe_to_complete"`
	} `json:"reshards"`
}

// TestMoveTablesOffline moves customer and corder from customer to
// commerce while rows are written, with readers away: a named subscriber
// and a webhook (its receiver down) away across switch and complete, an
// anonymous reader from before the move that reconnects after a gateway
// restart between switch and complete, and, after complete, anonymous
// cursors from before the move on a stream with on_gap resync and one
// with on_gap fail. The away subscribers are bridged (GET /v1/reshards
// lists the cutover, safe_to_complete once they are) and get every row
// once; the restarted gateway resumes the reader in the source half and
// crosses exactly; the cursors after complete get resync / 409. The
// tables are moved forward again at the end. (≈ 1 min.)
func TestMoveTablesOffline(t *testing.T) {
	needE2E(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	tablesAtHome(t, ctx)
	g := startGateway(t, whGatewayFlags(t, "--vtctld", cluster.VtctldAddr())...)
	suffix := strconv.FormatInt(time.Now().UnixNano()%1e6, 10)
	stream, failStream := "mto-"+suffix, "mtf-"+suffix
	g.createStream(t, map[string]any{"name": stream, "keyspace": homeKeyspace, "tables": []string{"customer"}})
	g.createStream(t, map[string]any{"name": failStream, "keyspace": homeKeyspace, "tables": []string{"customer"}, "on_gap": "fail"})
	cur := initialCursor(t, ctx, g, stream)
	failCur := initialCursor(t, ctx, g, failStream)

	// alice acks the start and goes away; the webhook's receiver is down.
	alice, _ := connectPull(ctx, g, stream, "alice", "")
	if err := alice.ack(ctx, cur); err != nil {
		t.Fatal(err)
	}
	r := newWhReceiver(t, nil)
	wh := createWebhook(t, g, stream, map[string]any{
		"url": r.url(), "secret": r.secret, "max_attempts": 1000, "timeout": "2s", "batch_max_events": 200,
	})
	r.down()

	db := globalDB(t)
	w := &moveWriter{db: db, tag: "mto" + suffix}
	waitRows, stopWriting := w.start(t, ctx)
	waitRows(50)
	wf := "mto" + suffix
	if err := cluster.MoveTables(ctx, otherKeyspace, wf, homeKeyspace, "customer,corder"); err != nil {
		t.Fatal(err)
	}
	waitRows(50)
	// A failure from here on leaves the tables switched: put them home.
	home := false
	defer func() {
		if !home {
			sendHome(t, wf)
		}
	}()
	switchedAt := time.Now()
	if err := cluster.SwitchTraffic(ctx, otherKeyspace, wf); err != nil {
		t.Fatal(err)
	}
	waitRows(50)
	// The cutover is listed, and it is safe to complete once alice and the
	// webhook are bridged.
	eventually(t, 2*time.Minute, "the MoveTables cutover listed and safe to complete", func() error {
		var rep movesReport
		if st, err := g.do(ctx, "GET", "/v1/reshards", nil, &rep); err != nil || st != 200 {
			return fmt.Errorf("GET /v1/reshards: %d %v", st, err)
		}
		for _, m := range rep.Reshards {
			// Earlier runs' cutovers are listed too.
			if m.Type != "movetables" || m.Keyspace != homeKeyspace || m.TargetKeyspace != otherKeyspace || m.SeenAt.Before(switchedAt) {
				continue
			}
			if !m.Safe {
				return fmt.Errorf("not safe to complete: bridges %+v, blocking %+v", m.Bridges, m.Blocking)
			}
			done := map[string]bool{}
			for _, b := range m.Bridges {
				done[b.Subscriber] = b.State == "done"
			}
			if !done["alice"] || !done["webhook."+wh.ID] {
				t.Fatalf("safe to complete before alice and the webhook were bridged: %+v", m.Bridges)
			}
			for _, b := range m.Bridges {
				if b.State == "failed" {
					t.Fatalf("bridge %s/%s failed: %s", b.Stream, b.Subscriber, b.Error)
				}
			}
			t.Logf("cutover listed: tables %v, bridges %+v", m.Tables, m.Bridges)
			return nil
		}
		return fmt.Errorf("no movetables cutover %s -> %s in %+v", homeKeyspace, otherKeyspace, rep)
	})

	// The gateway restarts between switch and complete; a reader from
	// before the move comes back to it, and reads the source up to the
	// cutover before `complete` drops the source tables.
	g.restart(syscall.SIGTERM)
	var def struct {
		Keyspace string `json:"keyspace"`
	}
	if st, err := g.do(ctx, "GET", "/v1/streams/"+stream, nil, &def); err != nil || st != 200 || def.Keyspace != otherKeyspace {
		t.Fatalf("after the restart: GET stream: %d %v, keyspace %q (want %s)", st, err, def.Keyspace, otherKeyspace)
	}
	anonClient, _ := connectPull(ctx, g, stream, "", cur)
	anon := pump(ctx, anonClient)
	defer anon.stop()
	eventually(t, 2*time.Minute, "the reader from before the move crossed it", func() error {
		anon.mu.Lock()
		defer anon.mu.Unlock()
		for _, e := range anon.q {
			if e.Type == "moved" {
				return nil
			}
		}
		if anon.err != nil {
			t.Fatalf("reader from before the move: %v", anon.err)
		}
		return fmt.Errorf("%d events read", len(anon.q))
	})
	waitRows(50)
	if err := cluster.Complete(ctx, otherKeyspace, wf); err != nil {
		t.Fatal(err)
	}
	waitRows(50)
	stopWriting()
	want := w.settle(t, ctx)
	t.Logf("%d rows written (%d inserts failed during the switch)", len(want), w.errs)

	// After complete: a cursor from before the move cannot be read up to
	// the cutover any more.
	resync, _ := connectPull(ctx, g, stream, "", cur)
	if e, err := resync.next(ctx); err != nil || e.Type != "resync" {
		t.Errorf("anonymous cursor from before a completed move: %+v %v, want a resync event", e, err)
	} else {
		t.Logf("after complete: %s", e.Raw)
	}
	q := url.Values{"cursor": {failCur}, "wait": {"1s"}}
	var gap map[string]any
	if st, err := g.do(ctx, "GET", "/v1/streams/"+failStream+"/changes?"+q.Encode(), nil, &gap); err != nil || st != http.StatusConflict {
		t.Errorf("on_gap fail, cursor from before a completed move: %d %v %v, want 409", st, err, gap)
	}

	// alice and the webhook come back; the reader from before the move
	// reads on.
	r.up()
	aliceBack, _ := connectPull(ctx, g, stream, "alice", "")
	end := newReadEnd(2)
	end.write = globalMarkers(db)
	var wg sync.WaitGroup
	type result struct {
		got   []ev
		err   error
		moves int
	}
	results := map[string]*result{"alice": {}, "anonymous": {}}
	for name, c := range map[string]client{"alice": aliceBack, "anonymous": anon.reader()} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res := results[name]
			res.got, res.err = readTo(ctx, c, want, end, func(e ev) {
				if e.Type == "moved" {
					res.moves++
				}
			})
		}()
	}
	wg.Wait()
	for name, res := range results {
		if res.err != nil {
			t.Errorf("%s: %v", name, res.err)
		}
		checkExactlyOnce(t, name, res.got, want)
		t.Logf("%s: %d rows, %d moved events", name, len(res.got), res.moves)
	}
	for name, res := range results {
		// alice was bridged: her spool ends with the notice.
		if res.moves != 1 {
			t.Errorf("%s got %d moved events, want 1", name, res.moves)
		}
	}
	r.waitRows(t, ctx, want)
	var hooked []ev // the end markers were delivered too
	for _, e := range r.processed() {
		if strings.HasPrefix(e.str("email"), w.tag) {
			hooked = append(hooked, e)
		}
	}
	checkExactlyOnce(t, "webhook", hooked, want)
	if moved := len(r.processedOf("moved")); moved != 1 {
		t.Errorf("the webhook (bridged) got %d moved events, want 1", moved)
	}
	if v := getWebhook(t, g, stream, wh.ID); v.DeadLetters != 0 {
		t.Errorf("webhook after the move: %+v", v)
	}

	// Home again for the other tests.
	applyCustomerVSchema(t, ctx)
	back := "mtb" + suffix
	if err := cluster.MoveTables(ctx, homeKeyspace, back, otherKeyspace, "customer,corder"); err != nil {
		t.Fatal(err)
	}
	if err := cluster.SwitchTraffic(ctx, homeKeyspace, back); err != nil {
		t.Fatal(err)
	}
	if err := cluster.Complete(ctx, homeKeyspace, back); err != nil {
		t.Fatal(err)
	}
	home = true
}

// sendHome completes the switched workflow wf (customer -> commerce) and
// moves the tables back to customer, errors ignored: a test that failed
// half-way must not leave the tables away (tablesAtHome would not see it
// while routing rules still send customer.customer to commerce).
func sendHome(t *testing.T, wf string) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := cluster.Complete(ctx, otherKeyspace, wf); err != nil {
		t.Logf("putting the tables home: complete %s: %v", wf, err)
	}
	applyCustomerVSchema(t, ctx)
	home := wf + "h"
	for _, step := range []func() error{
		func() error { return cluster.MoveTables(ctx, homeKeyspace, home, otherKeyspace, "customer,corder") },
		func() error { return cluster.SwitchTraffic(ctx, homeKeyspace, home) },
		func() error { return cluster.Complete(ctx, homeKeyspace, home) },
	} {
		if err := step(); err != nil {
			t.Logf("putting the tables home: %v", err)
			return
		}
	}
}
