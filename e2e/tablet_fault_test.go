package e2e

import (
	"context"
	"strings"
	"testing"
	"time"
)

// shardOf maps each email a reader got to the shard it came from.
func shardOf(r *bgReader) map[string]string {
	got, _, _ := r.snapshot()
	m := map[string]string{}
	for _, e := range got {
		m[e.str("email")] = e.Shard
	}
	return m
}

// TestTabletRestartOtherShardFlows: customer is split in -80 and 80-; the
// vttablet (and mysqld) of -80 is stopped for 30 s and started again while
// rows are written at 20/s. Readers on every transport and a webhook get
// 80-'s rows throughout, -80's once it is back, every row exactly once and
// in order per shard; none is dropped.
func TestTabletRestartOtherShardFlows(t *testing.T) {
	needE2E(t)
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	freshCluster(t, ctx)
	reshardStep(t, ctx, "tabletfault", "0", "-80,80-")
	recs, err := cluster.Tablets()
	if err != nil {
		t.Fatal(err)
	}
	uid := 0
	for _, r := range recs {
		if r.Keyspace == "customer" && r.Shard == "-80" {
			uid = r.UID
		}
	}
	if uid == 0 {
		t.Fatalf("no tablet for customer/-80 in %+v", recs)
	}
	t.Cleanup(func() {
		// Whatever happened, leave the tablet running for the next test.
		if err := cluster.StartTablet(context.Background(), uid); err != nil {
			t.Errorf("start tablet %d after the test: %v", uid, err)
		}
	})

	run := startFaultRun(t, ctx, "tab")
	g, f, w := run.g, run.f, run.w

	stopAt := time.Now()
	if err := cluster.StopTablet(ctx, uid); err != nil {
		t.Fatal(err)
	}
	stoppedAt := time.Now()
	t.Logf("tablet %d (customer/-80) stopped in %v", uid, stoppedAt.Sub(stopAt).Round(time.Millisecond))
	// The other shard flows while -80 is down: rows written now (all of
	// them 80-'s: -80's inserts fail) reach every reader.
	f.waitRowsAfter(t, ctx, w, stoppedAt, 40, "while -80 is down")
	select {
	case <-time.After(time.Until(stoppedAt.Add(30 * time.Second))): // the outage's length is the scenario
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
	startAt := time.Now()
	// Every reader got the rows written while -80 was down (all of them
	// 80-'s) before -80 returned; a few seconds' slack for the last ones.
	whileDown := rowsAfter(w, stoppedAt)
	inserted := w.insertedAt()
	for _, r := range f.readers {
		shards, arrived := shardOf(r), r.arrivals()
		for _, e := range whileDown {
			switch at, ok := arrived[e]; {
			case shards[e] == "-80":
				t.Errorf("%s: row %s of -80 while its tablet was down", r.name, e)
			case inserted[e].Before(startAt.Add(-3*time.Second)) && (!ok || at.After(startAt)):
				t.Errorf("%s: row %s, written while -80 was down, did not arrive while it was down", r.name, e)
			}
		}
	}
	if err := cluster.StartTablet(ctx, uid); err != nil {
		t.Fatal(err)
	}
	startedAt := time.Now()
	t.Logf("tablet %d down for %v, started in %v; %d rows of 80- written meanwhile",
		uid, startAt.Sub(stoppedAt).Round(time.Millisecond), startedAt.Sub(startAt).Round(time.Millisecond), len(whileDown))

	// -80's rows come back: wait for rows written after its return on
	// both shards.
	f.waitRowsAfter(t, ctx, w, startedAt, 100, "after -80 returned")
	run.finish(t, ctx, "while -80 was down")
	f.report(t, "-80 tablet down 30 s", w, stopAt, time.Now())
	// How long -80's rows took to come back after its tablet did.
	inserted = w.insertedAt()
	var parts []string
	for _, r := range f.readers {
		shards, arrived := shardOf(r), r.arrivals()
		first := time.Duration(-1)
		for e, sh := range shards {
			if sh == "-80" && inserted[e].After(startedAt) {
				if d := arrived[e].Sub(startedAt); first < 0 || d < first {
					first = d
				}
			}
		}
		gap80, _ := rowGaps(arrivedOn(arrived, shards, "80-"), nil, stopAt, startedAt)
		parts = append(parts, r.name+": 80- gap "+gap80.Round(100*time.Millisecond).String()+", first -80 row "+first.Round(100*time.Millisecond).String())
	}
	t.Logf("while -80 was away, longest wait for an 80- row and the first -80 row after its return: %s", strings.Join(parts, "; "))
	run.noneClosedUpstreamFailed(t)
	for _, line := range strings.Split(g.log.String(), "\n") {
		if strings.Contains(line, "upstream") && (strings.Contains(line, "level=WARN") || strings.Contains(line, "available again")) {
			t.Logf("gateway: %.400s", line)
		}
	}
}

// arrivedOn keeps the arrivals of rows of shard.
func arrivedOn(arrived map[string]time.Time, shards map[string]string, shard string) map[string]time.Time {
	out := map[string]time.Time{}
	for e, at := range arrived {
		if shards[e] == shard {
			out[e] = at
		}
	}
	return out
}
