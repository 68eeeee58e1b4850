package e2e

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/vstream-gateway/vstream-gateway/vtlocal"
)

// primaryPoll is the gateway's --primary-poll in TestReparents.
const primaryPoll = 2 * time.Second

// TestReparents: customer is split in -80 and 80-, and -80 gets a replica
// tablet. Readers on every transport (named and anonymous) and a webhook
// read while rows are written on both shards at 20/s, through two faults of
// -80: a planned reparent (vtlocal prs) onto the replica, then the new primary's
// mysqld killed (SIGKILL) and an EmergencyReparentShard onto another
// replica. No reader is dropped, every row arrives exactly once and in order
// per shard, and the gateway does not restart. ≈ 2 min, so only with
// VSG_FAULTS=1 (make test-faults).
func TestReparents(t *testing.T) {
	needFaults(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	freshCluster(t, ctx)
	reshardStep(t, ctx, "reparent", "0", "-80,80-")
	recs, err := cluster.Tablets()
	if err != nil {
		t.Fatal(err)
	}
	first := 0 // -80's primary
	for _, r := range recs {
		if r.Keyspace == "customer" && r.Shard == "-80" && !r.Replica {
			first = r.UID
		}
	}
	addAt := time.Now()
	replica, err := cluster.AddReplica(ctx, "customer", "-80")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("replica %s of customer/-80 added in %v", replica.Alias(), time.Since(addAt).Round(time.Millisecond))
	t.Cleanup(func() {
		// Back to one tablet per shard: whichever tablet is not -80's
		// primary now (a replica, or the one whose mysqld was killed)
		// goes.
		recs, err := cluster.Tablets()
		if err != nil {
			t.Error(err)
			return
		}
		for _, r := range recs {
			if r.Keyspace == "customer" && r.Shard == "-80" && r.Replica {
				if err := cluster.RemoveTablet(context.Background(), r.UID); err != nil {
					t.Errorf("remove tablet %d after the test: %v", r.UID, err)
				}
			}
		}
	})

	run := startFaultRun(t, ctx, "rep", "--primary-poll", primaryPoll.String())
	g, stream, f, w := run.g, run.stream, run.f, run.w

	// Fault 1: PlannedReparentShard of -80 onto the replica.
	prsAt := time.Now()
	primary, err := cluster.PlannedReparent(ctx, "customer", "-80", replica.UID)
	if err != nil {
		t.Fatal(err)
	}
	prsDone := time.Now()
	t.Logf("PlannedReparentShard customer/-80 onto %s took %v", primary.Alias(), prsDone.Sub(prsAt).Round(time.Millisecond))
	f.waitRowsAfter(t, ctx, w, prsDone, 60, "after the planned reparent")
	afterPRS := time.Now()

	// Fault 2: the new primary's mysqld dies; EmergencyReparentShard
	// promotes a replica. It has to be a new one: ERS onto a tablet with a
	// lower uid than the old primary's cannot work on MariaDB (vtlocal
	// relayLogApplied), so the old primary, a replica since the PRS, goes
	// and a fresh replica (302) takes its place.
	if err := cluster.RemoveTablet(ctx, first); err != nil {
		t.Fatal(err)
	}
	spare, err := cluster.AddReplica(ctx, "customer", "-80")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("replica %s replaced the old primary %s", spare.Alias(), vtlocal.TabletAlias(first))
	f.waitRowsAfter(t, ctx, w, time.Now(), 20, "after the replica was replaced")
	killAt := time.Now()
	if err := cluster.KillMySQL(ctx, primary.UID); err != nil {
		t.Fatal(err)
	}
	back, err := cluster.EmergencyReparent(ctx, "customer", "-80", spare.UID)
	if err != nil {
		t.Fatal(err)
	}
	ersDone := time.Now()
	t.Logf("mysqld of %s killed; EmergencyReparentShard onto %s done %v later",
		primary.Alias(), back.Alias(), ersDone.Sub(killAt).Round(time.Millisecond))
	f.waitRowsAfter(t, ctx, w, ersDone, 60, "after the emergency reparent")

	run.finish(t, ctx, "during the reparents")
	f.report(t, "PlannedReparentShard", w, prsAt, afterPRS)
	f.report(t, "mysqld killed + EmergencyReparentShard", w, killAt, time.Now())
	// PRS: vtgate moves the VStream to the new primary by itself within a
	// second. ERS: vtgate would keep -80's part of the VStream on the dead
	// primary's vttablet (up, its mysqld gone) until it gives up (0.5 s
	// and 29 s in two runs); the gateway's primary watch sees the new
	// primary within a poll and reopens the shard's VStreams. A row written
	// from the kill on waits at most for the promotion, one poll, and the
	// reopen.
	if lat := f.maxLatency(w, prsAt, afterPRS); lat > 10*time.Second {
		t.Errorf("PRS: rows written around the reparent waited up to %v", lat)
	}
	ersBound := ersDone.Sub(killAt) + primaryPoll + 5*time.Second
	if lat := f.maxLatency(w, killAt, time.Now()); lat > ersBound {
		t.Errorf("ERS: rows written around the reparent waited up to %v, want at most %v (the promotion, a primary poll, 5 s)", lat, ersBound)
	}
	t.Logf("ERS: rows written after the promotion waited up to %v", f.maxLatency(w, ersDone, time.Now()).Round(10*time.Millisecond))
	if n := metricSum(t, g, "vsg_upstream_reparents_total", `keyspace="customer"`, `shard="-80"`); n < 2 {
		t.Errorf("vsg_upstream_reparents_total{shard=-80} = %v, want a change for each reparent", n)
	}
	if !regexp.MustCompile(`msg="shard primary changed; reopening its VStreams from their last transaction" keyspace=customer shard=-80 old_primary=` +
		regexp.QuoteMeta(primary.Alias()) + ` new_primary=` + regexp.QuoteMeta(back.Alias())).MatchString(g.log.String()) {
		t.Errorf("no log of -80's primary changing from %s to %s", primary.Alias(), back.Alias())
	}
	run.noneClosedUpstreamFailed(t)
	n := metricSum(t, g, "vsg_upstream_interruptions_total", `stream="`+stream+`"`)
	secs := metricSum(t, g, "vsg_upstream_outage_seconds_sum", `stream="`+stream+`"`)
	t.Logf("gateway: %v interruptions of the stream's VStreams, %.1f s in all", n, secs)
	for _, line := range strings.Split(g.log.String(), "\n") {
		if strings.Contains(line, "upstream") || strings.Contains(line, "reparent") || strings.Contains(line, "primary") {
			t.Logf("gateway: %.500s", line)
		}
	}
}
