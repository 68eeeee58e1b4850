package e2e

import (
	"context"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func watching(g *gateway, ks string) bool {
	return strings.Count(g.log.String(), `msg="journal watcher started" keyspace=`+ks) >
		strings.Count(g.log.String(), `msg="journal watcher stopped" keyspace=`+ks)
}

// TestJournalWatcherFailover runs two gateways on one Redis: exactly one
// watches the keyspace; when it is killed the other takes over within the
// lease time and records the journal of a reshard switched during the
// handover, with no client connected.
func TestJournalWatcherFailover(t *testing.T) {
	needE2E(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	freshCluster(t, ctx)
	g1 := startGateway(t, withRedis()...)
	g2 := startGateway(t, withRedis()...)
	stream := "watch-" + strconv.FormatInt(time.Now().UnixNano()%1e6, 10)
	g1.createStream(t, map[string]any{"name": stream, "keyspace": "customer", "tables": []string{"customer"}})

	var holder, other *gateway
	for holder == nil {
		a, b := watching(g1, "customer"), watching(g2, "customer")
		switch {
		case a && b:
			t.Fatal("both gateways watch keyspace customer")
		case a:
			holder, other = g1, g2
		case b:
			holder, other = g2, g1
		}
		select {
		case <-ctx.Done():
			t.Fatal("no gateway started a journal watcher")
		case <-time.After(100 * time.Millisecond):
		}
	}
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
	if err := cluster.SwitchTraffic(ctx, "customer", "watchsplit"); err != nil {
		t.Fatal(err)
	}
	for !watching(other, "customer") {
		select {
		case <-ctx.Done():
			t.Fatal("the surviving gateway never took the watcher over")
		case <-time.After(100 * time.Millisecond):
		}
	}
	t.Logf("watcher taken over %v after the holder was killed", time.Since(killed).Round(time.Millisecond))
	waitBridged(t, ctx, other, "0", "-80,80-")
	t.Logf("journal recorded %v after the holder was killed", time.Since(killed).Round(time.Millisecond))
	if err := cluster.Complete(ctx, "customer", "watchsplit"); err != nil {
		t.Fatal(err)
	}
}
