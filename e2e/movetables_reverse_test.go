package e2e

import (
	"context"
	"strconv"
	"testing"
	"time"
)

// TestMoveTablesReverse: a MoveTables workflow created and cancelled
// before its switch changes nothing for readers (no `moved`, every row
// once from the source); one switched and then reversed (ReverseTraffic,
// tables back in customer) is followed both ways, exactly, with one
// `moved` event each way; it is cancelled afterwards, leaving the tables
// at home. Readers on WebSocket and pull stay online throughout, rows are
// written without pause. (≈ 1 min.)
func TestMoveTablesReverse(t *testing.T) {
	needE2E(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	tablesAtHome(t, ctx)
	suffix := strconv.FormatInt(time.Now().UnixNano()%1e6, 10)
	cancelled, reversed := "c"+suffix, "r"+suffix
	// Whatever happens, the tables end at home: a switched workflow is
	// reversed, and every workflow of this test cancelled (a no-op once
	// it is gone).
	var switched, home bool
	t.Cleanup(func() {
		if home {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		if switched {
			if err := cluster.ReverseTraffic(ctx, otherKeyspace, reversed); err != nil {
				t.Logf("putting the tables home: reverse %s: %v", reversed, err)
			}
		}
		for _, wf := range []string{cancelled, reversed} {
			if err := cluster.Cancel(ctx, otherKeyspace, wf); err != nil {
				t.Logf("putting the tables home: cancel %s: %v", wf, err)
			}
		}
	})
	g := startGateway(t, append(withRedis(t), "--vtctld", cluster.VtctldAddr())...)
	stream := "mtr-" + suffix
	g.createStream(t, map[string]any{"name": stream, "keyspace": homeKeyspace, "tables": []string{"customer"}})
	db := globalDB(t)
	w := &moveWriter{db: db, tag: "mtr" + suffix}

	cur := initialCursor(t, ctx, g, stream)
	var readers []*moveReader
	for name, connect := range map[string]func(context.Context, *gateway, string, string, string) (client, error){
		"ws": connectWS, "pull": connectPull,
	} {
		c, err := connect(ctx, g, stream, "", cur)
		if err != nil {
			t.Fatal(err)
		}
		defer c.close()
		p := pump(ctx, c)
		defer p.stop()
		readers = append(readers, &moveReader{name: name, p: p})
	}
	waitRows, stopWriting := w.start(t, ctx)
	defer stopWriting()
	keyspaceIs := func(want string) {
		t.Helper()
		var def struct {
			Keyspace string `json:"keyspace"`
		}
		if st, err := g.do(ctx, "GET", "/v1/streams/"+stream, nil, &def); err != nil || st != 200 || def.Keyspace != want {
			t.Errorf("GET stream: %d %v, keyspace %q (want %s)", st, err, def.Keyspace, want)
		}
	}
	step := func(what string, f func() error) {
		t.Helper()
		if err := f(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	waitRows(30)

	// Created and cancelled before the switch: nothing changes.
	step("MoveTables create", func() error {
		return cluster.MoveTables(ctx, otherKeyspace, cancelled, homeKeyspace, "customer,corder")
	})
	waitRows(50)
	step("MoveTables cancel", func() error { return cluster.Cancel(ctx, otherKeyspace, cancelled) })
	waitRows(30)
	keyspaceIs(homeKeyspace)

	// Switched, then reversed: followed there and back.
	step("MoveTables create", func() error { return cluster.MoveTables(ctx, otherKeyspace, reversed, homeKeyspace, "customer,corder") })
	waitRows(30)
	switched = true
	step("SwitchTraffic", func() error { return cluster.SwitchTraffic(ctx, otherKeyspace, reversed) })
	waitRows(80)
	keyspaceIs(otherKeyspace)
	reverseAt := time.Now()
	step("ReverseTraffic", func() error { return cluster.ReverseTraffic(ctx, otherKeyspace, reversed) })
	waitRows(80)
	switched = false
	step("MoveTables cancel after the reverse", func() error { return cluster.Cancel(ctx, otherKeyspace, reversed) })
	home = true
	waitRows(30)
	stopWriting()
	keyspaceIs(homeKeyspace)
	want := w.settle(t, ctx)
	t.Logf("%d rows written (%d inserts failed during switches)", len(want), w.errs)

	readMoves(t, ctx, db, readers, want)
	for _, r := range readers {
		if len(r.moves) != 2 || r.moves[0].From != homeKeyspace || r.moves[0].To != otherKeyspace ||
			r.moves[1].From != otherKeyspace || r.moves[1].To != homeKeyspace {
			t.Errorf("%s: moved events %+v, want %s->%s, then back by ReverseTraffic", r.name, r.moves, homeKeyspace, otherKeyspace)
		}
	}
	if first, ok := readers[0].p.firstFrom(homeKeyspace, reverseAt); ok {
		t.Logf("first row from %s reached the %s reader %v after ReverseTraffic began", homeKeyspace, readers[0].name, first.Sub(reverseAt).Round(time.Millisecond))
	}
}
