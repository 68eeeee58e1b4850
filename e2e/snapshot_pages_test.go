package e2e

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"net/url"
	"slices"
	"strconv"
	"testing"
	"time"
)

// snapshotPage is one pull page of a snapshot stream.
type snapshotPage struct {
	Events     []json.RawMessage `json:"events"`
	NextCursor string            `json:"next_cursor"`
}

// pageSnapshot pulls pages of limit events from cursor until the snapshot
// is complete (or pages run out), returning the copied rows' ids in order,
// the cursor after each page with how many ids had come by then (a page
// may be empty: a long-poll that ended before the copy sent rows), and the
// largest page seen.
func pageSnapshot(t *testing.T, ctx context.Context, g *gateway, stream, cursor string, limit, maxPages int) (ids []string, cursors []string, idsAt []int, largest int) {
	t.Helper()
	ids, _, cursors, idsAt, largest = pageSnapshotTables(t, ctx, g, stream, cursor, limit, maxPages)
	return ids, cursors, idsAt, largest
}

// pageSnapshotTables is pageSnapshot that also returns the keys of the
// copied rows of the stream's other tables (corder's order_id).
func pageSnapshotTables(t *testing.T, ctx context.Context, g *gateway, stream, cursor string, limit, maxPages int) (ids, orders, cursors []string, idsAt []int, largest int) {
	t.Helper()
	for range maxPages {
		q := url.Values{"limit": {strconv.Itoa(limit)}, "wait": {"2s"}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		var p snapshotPage
		if st, err := g.do(ctx, "GET", "/v1/streams/"+stream+"/changes?"+q.Encode(), nil, &p); err != nil || st != 200 {
			t.Fatalf("page: %d %v", st, err)
		}
		largest = max(largest, len(p.Events))
		done := false
		for _, raw := range p.Events {
			e, err := parseEvent(raw)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case e.Type == "snapshot_complete":
				done = true
			case e.Type == "change" && e.Op == "snapshot" && e.Table == "customer":
				ids = append(ids, string(e.Key["customer_id"]))
			case e.Type == "change" && e.Op == "snapshot" && e.Table == "corder":
				orders = append(orders, string(e.Key["order_id"]))
			}
		}
		cursor = p.NextCursor
		cursors = append(cursors, cursor)
		idsAt = append(idsAt, len(ids))
		if done {
			return ids, orders, cursors, idsAt, largest
		}
	}
	t.Fatalf("snapshot not complete after %d pages", maxPages)
	return
}

// A snapshot pages by limit: a copy batch of thousands of rows is cut into
// pages of at most limit rows, each ending at a cursor made from the last
// row's primary key. Resumed on another gateway (nothing parked there),
// such a cursor continues the copy right after that row: every row once.
func TestSnapshotPagesHonourLimit(t *testing.T) {
	needE2E(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	g := startGateway(t, withRedis(t)...)
	stream := "snap-" + strconv.FormatInt(time.Now().UnixNano()%1e6, 10)
	g.createStream(t, map[string]any{"name": stream, "keyspace": "customer", "tables": []string{"customer"}, "start": "snapshot"})

	// Enough rows for several copy batches, whatever earlier tests left.
	w := newWriter(t, "snap"+strconv.FormatInt(time.Now().UnixNano()%1e6, 10))
	if err := w.insert(ctx, "rows", 300); err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for _, id := range customerIDs(t, ctx) {
		want[id] = true
	}
	const limit = 50
	ids, cursors, idsAt, largest := pageSnapshot(t, ctx, g, stream, "", limit, len(want)/limit*2+20)
	t.Logf("%d rows in the table, copied in %d pages of at most %d", len(want), len(cursors), largest)
	if largest > limit {
		t.Errorf("a snapshot page held %d events, limit %d", largest, limit)
	}
	checkIDs(t, "paged snapshot", ids, want)

	// Resume from the cursor after the third page that held rows (the
	// first pages can be empty while the copy starts), on a gateway that
	// has nothing parked: vtgate continues the copy after its row.
	k := slices.IndexFunc(idsAt, func(n int) bool { return n >= 3*limit })
	if k < 0 || idsAt[k] >= len(ids) {
		t.Fatalf("pages of %v rows: too few to resume in the middle", idsAt)
	}
	g2 := startGateway(t, withRedis(t)...)
	rest, _, _, _ := pageSnapshot(t, ctx, g2, stream, cursors[k], 1000, len(want)+20)
	seen := map[string]bool{}
	for _, id := range ids[:idsAt[k]] {
		seen[id] = true
	}
	left := map[string]bool{}
	for id := range want {
		if !seen[id] {
			left[id] = true
		}
	}
	checkIDs(t, "resumed in the middle of a copy batch", rest, left)
}

// checkIDs asserts got holds every id of want exactly once and nothing else.
func checkIDs(t *testing.T, what string, got []string, want map[string]bool) {
	t.Helper()
	n := map[string]int{}
	for _, id := range got {
		n[id]++
		if n[id] == 2 {
			t.Errorf("%s: row %s twice", what, id)
		}
		if !want[id] {
			t.Errorf("%s: unexpected row %s", what, id)
		}
	}
	missing := 0
	for id := range want {
		if n[id] == 0 {
			missing++
		}
	}
	if missing > 0 {
		t.Errorf("%s: %d of %d rows missing", what, missing, len(want))
	}
}

// A reader of a snapshot stream gets every current row first while the
// stream's tail is running. vtgate's first position of a copy names the
// shard's GTID and no table, a live position as far as the reader can tell:
// a reader that took it for one joined the tail at once and never got the
// copy (an empty page, up_to_date false, forever), and a cursor with it
// resumed past the copy. Positions inside a copy now stay inside it
// (source/copyhold.go).
func TestSnapshotWithTheTailRunning(t *testing.T) {
	needE2E(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	g := startGateway(t, withRedis(t)...)
	stream := "snaptail-" + strconv.FormatInt(time.Now().UnixNano()%1e6, 10)
	// Two tables, as in examples/streams.yaml: vttablet copies them one
	// after the other (corder first, often empty), with a position
	// between them that names no table either.
	g.createStream(t, map[string]any{"name": stream, "keyspace": "customer", "tables": []string{"customer", "corder"}, "start": "snapshot"})
	w := newWriter(t, "snaptail"+strconv.FormatInt(time.Now().UnixNano()%1e6, 10))
	if err := w.insert(ctx, "rows", 20); err != nil {
		t.Fatal(err)
	}
	// An order, so that the copy has a table finished before customer's.
	db, err := cluster.OpenDB("customer")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	order := strconv.FormatInt(8e12+time.Now().UnixNano()%1e9, 10)
	if _, err := db.ExecContext(ctx, "insert into corder(order_id, customer_id, sku, price) values (?, 1, 'snapshot', 1)", order); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.ExecContext(context.Background(), "delete from corder where order_id = ?", order) })
	// A reader from the live end starts the tail, and its long-poll lasts
	// until the tail has vtgate's heartbeats in its ring.
	var live snapshotPage
	if st, err := g.do(ctx, "GET", "/v1/streams/"+stream+"/changes?start=now&wait=2s", nil, &live); err != nil || st != 200 {
		t.Fatalf("live reader: %d %v", st, err)
	}
	eventually(t, 10*time.Second, "the stream's tail holds entries", func() error {
		if n := metricSum(t, g, "vsg_tail_ring_entries", `stream="`+stream+`"`); n == 0 {
			return errors.New("its ring is empty")
		}
		return nil
	})
	want := map[string]bool{}
	for _, id := range customerIDs(t, ctx) {
		want[id] = true
	}
	orders := map[string]bool{}
	for _, id := range orderIDs(t, ctx, db) {
		orders[id] = true
	}
	const limit = 50
	ids, gotOrders, cursors, _, _ := pageSnapshotTables(t, ctx, g, stream, "", limit, len(want)/limit*2+20)
	t.Logf("%d customers and %d orders, copied in %d pages with the tail running", len(want), len(orders), len(cursors))
	checkIDs(t, "customers beside a running tail", ids, want)
	checkIDs(t, "orders beside a running tail", gotOrders, orders)

	// Resumed inside customer's copy on a gateway with nothing parked:
	// vttablet must not copy corder, finished before, again.
	if len(cursors) < 4 {
		t.Fatalf("only %d pages: too few to resume inside customer's copy", len(cursors))
	}
	g2 := startGateway(t, withRedis(t)...)
	rest, again, _, _, _ := pageSnapshotTables(t, ctx, g2, stream, cursors[2], 1000, len(want)+20)
	if len(again) > 0 {
		t.Errorf("resumed inside customer's copy: %d orders copied again", len(again))
	}
	// The copy goes in key order: resumed, it is the rest of the first
	// reading, from the row after the cursor on.
	if len(rest) == 0 || len(rest) >= len(ids) || !slices.Equal(rest, ids[len(ids)-len(rest):]) {
		t.Errorf("resumed inside customer's copy: %d customers, not the last ones of the %d read before", len(rest), len(ids))
	}
}

// orderIDs lists corder's keys.
func orderIDs(t *testing.T, ctx context.Context, db *sql.DB) []string {
	t.Helper()
	rows, err := db.QueryContext(ctx, "select order_id from corder")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		out = append(out, id)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
