package e2e

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/vstream-gateway/vstream-gateway/internal/wait"
)

// TestWebhookAcrossReshard: the receiver is down while customer is
// resharded 0 -> -80,80- and the reshard is completed (the old shard is
// deleted). The webhook is a named subscriber behind the cutover, so the
// gateway bridges it before the old shard goes; when the receiver comes
// back it gets every change written before, during and after the reshard
// exactly once after de-duplication by webhook-id, in order per shard,
// with valid signatures.
func TestWebhookAcrossReshard(t *testing.T) {
	needE2E(t)
	ctx, cancel := context.WithTimeout(context.Background(), 9*time.Minute)
	defer cancel()
	freshCluster(t, ctx)
	g := startGateway(t, whGatewayFlags(t)...)
	stream := newCustomerStream(t, g, "wh-reshard")
	r := newWhReceiver(t, nil)
	wh := createWebhook(t, g, stream, map[string]any{
		"url": r.url(), "secret": r.secret, "max_attempts": 1000, "timeout": "2s", "batch_max_events": 100,
	})
	w := newWriter(t, "whrs"+strconv.FormatInt(time.Now().UnixNano()%1e6, 10))

	// A few batches while the receiver is up.
	for i := range 3 {
		n := len(w.since(0))
		if err := w.insert(ctx, "up"+strconv.Itoa(i), 10); err != nil {
			t.Fatal(err)
		}
		r.waitRows(t, ctx, w.since(n))
	}
	before := len(r.messages())
	t.Logf("receiver up: %d rows in %d requests", len(w.since(0)), before)

	// The receiver goes away: connections are refused.
	r.down()
	downAt := time.Now()
	if err := w.insert(ctx, "down", 500); err != nil {
		t.Fatal(err)
	}

	// Rows keep coming while the keyspace is resharded, switched and
	// completed.
	during, stopDuring := context.WithCancel(ctx)
	duringDone := make(chan int, 1)
	go func() {
		n, failed := 0, 0
		for during.Err() == nil {
			if err := w.insert(ctx, "during", 1); err != nil {
				// A write refused around the switch: keep it in the
				// expected rows only if it committed after all.
				failed++
				t.Logf("write during the reshard failed: %v", err)
				w.recoverAmbiguous(ctx, t, err)
				// Pacing, not a wait: writes fail for a moment around
				// the switch.
				wait.Sleep(during, 100*time.Millisecond)
				continue
			}
			n++
			// Pacing: a steady trickle of writes across the reshard.
			wait.Sleep(during, 5*time.Millisecond)
		}
		if failed > 0 {
			t.Logf("%d writes failed during the reshard", failed)
		}
		duringDone <- n
	}()
	reshardStep(t, ctx, "whsplit", "0", "-80,80-")
	stopDuring()
	nDuring := <-duringDone
	waitBridged(t, ctx, g, "0", "-80,80-")
	if err := w.insert(ctx, "after", 100); err != nil {
		t.Fatal(err)
	}
	if err := w.insert(ctx, "sentinel", sentinels); err != nil {
		t.Fatal(err)
	}
	want := w.since(0)
	attemptsDown := len(r.messages()) - before
	t.Logf("receiver down for %v: %d rows written meanwhile (%d during the reshard); %d requests reached it",
		time.Since(downAt).Round(time.Millisecond), len(want)-30, nDuring, attemptsDown)
	if attemptsDown != 0 {
		t.Errorf("%d requests reached the receiver while it was down", attemptsDown)
	}

	// The receiver comes back.
	r.up()
	upAt := time.Now()
	r.waitRows(t, ctx, want)
	took := time.Since(upAt)

	msgs := r.messages()[before:]
	ids := map[string]int{}
	for _, m := range msgs {
		ids[m.id]++
	}
	retried := 0
	for _, n := range ids {
		if n > 1 {
			retried++
		}
	}
	got := r.processed()
	shards := map[string]int{}
	for _, e := range got {
		shards[e.Shard]++
	}
	t.Logf("receiver back: all %d rows delivered %v after it returned; %d requests, %d distinct webhook-ids (%d sent more than once); rows by shard %v",
		len(want), took.Round(time.Millisecond), len(msgs), len(ids), retried, shards)
	checkExactlyOnce(t, "webhook across reshard", got, want)
	if shards["-80"] == 0 || shards["80-"] == 0 {
		t.Errorf("rows by shard %v: want rows from both new shards", shards)
	}
	r.checkSignatures(t)
	if v := getWebhook(t, g, stream, wh.ID); v.DeadLetters != 0 || v.State != "active" {
		t.Errorf("webhook after the reshard: %+v", v)
	}
}
