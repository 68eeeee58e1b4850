package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vstream-gateway/vstream-gateway/internal/wait"
)

func watching(g *gateway, ks string) bool {
	return strings.Count(g.log.String(), `msg="journal watcher started" keyspace=`+ks) >
		strings.Count(g.log.String(), `msg="journal watcher stopped" keyspace=`+ks)
}

// The journal watcher's lease time and keyspace scan interval: the
// gateway's (reshard.NewWatcher's defaults, which it does not change).
const (
	watcherLeaseTTL = 10 * time.Second
	watcherScan     = 2 * time.Second
)

// takeoverSlack is what a takeover may take beyond its lease time and
// retry interval: the survivor's store round trips, the work starting
// (opening a VStream, sending a request), and the test noticing, on a
// machine whose two cores the cluster, two gateways and the test share.
const takeoverSlack = 3 * time.Second

// checkTakeover asserts that a lease was taken over from a killed holder
// within its bounds. The holder renewed every ttl/3 until it died, so its
// lease expired between 2/3·ttl and ttl after the kill; the survivor asks
// at least every retry interval. A takeover sooner than ttl/2 would mean
// the lease did not keep the survivor out; later than ttl + retry + slack,
// that the survivor did not come when it could.
func checkTakeover(t *testing.T, what string, took, ttl, retry time.Duration) {
	t.Helper()
	if lo, hi := ttl/2, ttl+retry+takeoverSlack; took < lo || took > hi {
		t.Errorf("%s taken over %v after the holder was killed, want within [%v, %v] (lease %v, retry every %v, slack %v)",
			what, took.Round(time.Millisecond), lo, hi, ttl, retry, takeoverSlack)
	}
}

// TestJournalWatcherFailover runs two gateways on one Redis: exactly one
// watches the keyspace; when it is killed the other takes over within the
// lease time and records the journal of a reshard switched during the
// handover, with no client connected.
func TestJournalWatcherFailover(t *testing.T) {
	needE2E(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	freshCluster(t, ctx)
	g1 := startGateway(t, withRedis(t)...)
	g2 := startGateway(t, withRedis(t)...)
	stream := "watch-" + strconv.FormatInt(time.Now().UnixNano()%1e6, 10)
	g1.createStream(t, map[string]any{"name": stream, "keyspace": "customer", "tables": []string{"customer"}})

	var holder, other *gateway
	eventually(t, time.Minute, "one gateway to start the journal watcher", func() error {
		a, b := watching(g1, "customer"), watching(g2, "customer")
		switch {
		case a && b:
			return wait.Abort(errors.New("both gateways watch keyspace customer"))
		case a:
			holder, other = g1, g2
		case b:
			holder, other = g2, g1
		default:
			return errors.New("neither watches keyspace customer yet")
		}
		return nil
	})
	// Let the holder save a position, then kill it and switch traffic at
	// once: the journal is written while nobody watches.
	if err := cluster.AddShards(ctx, "customer", []string{"-80", "80-"}); err != nil {
		t.Fatal(err)
	}
	if err := cluster.Reshard(ctx, "customer", "watchsplit", "0", "-80,80-"); err != nil {
		t.Fatal(err)
	}
	holder.stop(syscall.SIGKILL)
	killed := time.Now()
	// The takeover is watched for from the kill on: switching traffic may
	// take longer than the lease.
	type result struct {
		took time.Duration
		err  error
	}
	takeover := make(chan result, 1)
	go func() {
		err := eventuallyCtx(ctx, 2*time.Minute, "the surviving gateway to take the watcher over", func() error {
			if !watching(other, "customer") {
				return errors.New("not watching keyspace customer")
			}
			return nil
		})
		takeover <- result{time.Since(killed), err}
	}()
	if err := cluster.SwitchTraffic(ctx, "customer", "watchsplit"); err != nil {
		t.Fatal(err)
	}
	r := <-takeover
	if r.err != nil {
		t.Fatal(r.err)
	}
	t.Logf("watcher taken over %v after the holder was killed (lease %v, scan %v)", r.took.Round(time.Millisecond), watcherLeaseTTL, watcherScan)
	checkTakeover(t, "journal watcher", r.took, watcherLeaseTTL, watcherScan)
	waitBridged(t, ctx, other, "0", "-80,80-")
	t.Logf("journal recorded %v after the holder was killed", time.Since(killed).Round(time.Millisecond))
	if err := cluster.Complete(ctx, "customer", "watchsplit"); err != nil {
		t.Fatal(err)
	}
	reshardWhileNoGatewayRuns(t, ctx, other)
}

// reshardWhileNoGatewayRuns merges customer back to 0 while no gateway
// runs: the watcher's saved position is then on deleted shards and the
// merge's journal, written on them, is gone with them. The gateway that
// comes back says so instead of jumping to the live end in silence: the
// gap is listed under `unrecorded`, counted, and /readyz is degraded until
// it is dismissed; a named subscriber behind the merge gets `resync`, and
// one on an on_gap=fail stream a 409. It leaves customer on one shard, as
// the next test wants it.
func reshardWhileNoGatewayRuns(t *testing.T, ctx context.Context, g *gateway) {
	suffix := strconv.FormatInt(time.Now().UnixNano()%1e6, 10)
	stream, failStream := "gap-"+suffix, "gap-fail-"+suffix
	g.createStream(t, map[string]any{"name": stream, "keyspace": "customer", "tables": []string{"customer"}})
	g.createStream(t, map[string]any{"name": failStream, "keyspace": "customer", "tables": []string{"customer"}, "on_gap": "fail"})
	for _, s := range []string{stream, failStream} {
		cur := initialCursor(t, ctx, g, s)
		if st, err := g.do(ctx, "POST", "/v1/streams/"+s+"/subscribers/away/ack", map[string]string{"cursor": cur}, &map[string]any{}); err != nil || st != 200 {
			t.Fatalf("ack: %d %v", st, err)
		}
	}
	// The watcher has saved a position on -80,80- once it has run a while
	// (it saves every second): its subscribers' acks are on them too.
	eventually(t, time.Minute, "the journal watcher to run on the split keyspace", func() error {
		if !watching(g, "customer") {
			return errors.New("not watching keyspace customer")
		}
		return nil
	})
	w := newWriter(t, "gap"+suffix)
	if err := w.insert(ctx, "before-merge", 20); err != nil {
		t.Fatal(err)
	}
	g.stop(syscall.SIGKILL)
	reshardStep(t, ctx, "watchmerge", "-80,80-", "0")
	g.start()

	var gap struct {
		Unrecorded []struct {
			ID, Keyspace     string
			Missing, Serving []string
		} `json:"unrecorded"`
	}
	eventually(t, time.Minute, "the missed merge to be listed as unrecorded", func() error {
		if st, err := g.do(ctx, "GET", "/v1/reshards", nil, &gap); err != nil || st != 200 {
			return fmt.Errorf("GET /v1/reshards: %d %v", st, err)
		}
		if len(gap.Unrecorded) == 0 {
			return errors.New("no unrecorded reshard")
		}
		return nil
	})
	u := gap.Unrecorded[0]
	if len(gap.Unrecorded) != 1 || u.Keyspace != "customer" || strings.Join(u.Missing, ",") != "customer/-80,customer/80-" || strings.Join(u.Serving, ",") != "0" {
		t.Fatalf("unrecorded: %+v, want one of customer, missing -80 and 80-, serving 0", gap.Unrecorded)
	}
	if v := metricSum(t, g, "vsg_journal_gaps_total", `keyspace="customer"`); v != 1 {
		t.Errorf("vsg_journal_gaps_total{keyspace=customer} = %v, want 1", v)
	}
	readyz := func() string {
		var out struct{ Status string }
		if st, err := g.do(ctx, "GET", "/readyz", nil, &out); err != nil || st != 200 {
			t.Fatalf("GET /readyz: %d %v", st, err)
		}
		return out.Status
	}
	if st := readyz(); st != "degraded" {
		t.Errorf("/readyz status %q with an unrecorded reshard, want degraded", st)
	}

	// Nothing could continue the subscribers exactly: the gateway says so.
	c, err := connectPull(ctx, g, stream, "away", "")
	if err != nil {
		t.Fatal(err)
	}
	if e, err := c.next(ctx); err != nil || e.Type != "resync" {
		t.Fatalf("named subscriber behind the missed merge: first event %+v, %v; want resync", e, err)
	}
	var refused struct{ Error struct{ Code string } }
	if st, err := g.do(ctx, "GET", "/v1/streams/"+failStream+"/changes?subscriber=away", nil, &refused); err != nil || st != 409 || refused.Error.Code != "resume_impossible" {
		t.Errorf("on_gap=fail subscriber behind the missed merge: %d %+v %v, want 409 resume_impossible", st, refused, err)
	}

	if st, err := g.do(ctx, "DELETE", "/v1/reshards/gaps/customer/"+url.PathEscape(u.ID), nil, nil); err != nil || st != 204 {
		t.Fatalf("dismiss the gap: %d %v", st, err)
	}
	if st := readyz(); st != "ready" {
		t.Errorf("/readyz status %q after the gap was dismissed, want ready", st)
	}
}
