package e2e

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"github.com/redis/go-redis/v9"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// freshCluster makes sure customer is back to its single shard 0 (a
// previous run may have resharded it).
func freshCluster(t *testing.T, ctx context.Context) {
	t.Helper()
	st, err := cluster.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, ks := range st.Keyspaces {
		if ks.Name == "customer" && (len(ks.Shards) != 1 || ks.Shards[0].Name != "0") {
			t.Log("customer was resharded by an earlier run: recreating the cluster")
			if err := cluster.Down(ctx); err != nil {
				t.Fatal(err)
			}
			if err := cluster.Up(ctx); err != nil {
				t.Fatal(err)
			}
			// Journals, subscribers and watcher positions of the old
			// cluster mean nothing to the new one.
			flushRedis(t, ctx)
		}
	}
}

func flushRedis(t *testing.T, ctx context.Context) {
	t.Helper()
	opts, err := redis.ParseURL(redisURL)
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(opts)
	defer c.Close()
	if err := c.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
}

// writer inserts customers with recognisable emails, one per transaction,
// and remembers them in commit order. Goroutines that share a writer take
// turns row by row (seq): if two inserts could be in flight at once, the
// order in which they returned would not be the order in which they
// committed, and the per-shard order checks would compare against a wrong
// order.
type writer struct {
	db    *sql.DB
	tag   string
	seq   sync.Mutex // held from numbering a row until it is recorded
	mu    sync.Mutex // guards rows and count for readers
	rows  []string
	count int
}

// insertError is a failed insert of one numbered row, which may still
// have committed (see recoverAmbiguous).
type insertError struct {
	email string
	err   error
}

func (e *insertError) Error() string { return "insert " + e.email + ": " + e.err.Error() }
func (e *insertError) Unwrap() error { return e.err }

func newWriter(t *testing.T, tag string) *writer {
	db, err := cluster.OpenDB("customer")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return &writer{db: db, tag: tag}
}

func (w *writer) insert(ctx context.Context, phase string, n int) error {
	for i := 0; i < n; i++ {
		if err := w.insertRow(ctx, phase); err != nil {
			return err
		}
	}
	return nil
}

func (w *writer) insertRow(ctx context.Context, phase string) error {
	w.seq.Lock()
	defer w.seq.Unlock()
	w.mu.Lock()
	w.count++
	email := fmt.Sprintf("%s-%s-%05d@e2e", w.tag, phase, w.count)
	w.mu.Unlock()
	if _, err := w.db.ExecContext(ctx, "insert into customer(email) values (?)", email); err != nil {
		return &insertError{email: email, err: err}
	}
	w.mu.Lock()
	w.rows = append(w.rows, email)
	w.mu.Unlock()
	return nil
}

// recoverAmbiguous settles the failed insert err names: if its row
// committed after all it joins the expected rows. It holds the writer's
// turn while it looks, so that no later row is recorded before it.
func (w *writer) recoverAmbiguous(ctx context.Context, t *testing.T, failed error) {
	var ie *insertError
	if !errors.As(failed, &ie) {
		t.Errorf("not a failed insert: %v", failed)
		return
	}
	email := ie.email
	w.seq.Lock()
	defer w.seq.Unlock()
	err := eventuallyCtx(ctx, 10*time.Second, "whether "+email+" was written", func() error {
		var n int
		if err := w.db.QueryRowContext(ctx, "select count(*) from customer where email = ?", email).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			t.Logf("%s committed despite the error", email)
			w.mu.Lock()
			w.rows = append(w.rows, email)
			w.mu.Unlock()
		}
		return nil
	})
	if err != nil && ctx.Err() == nil {
		t.Error(err)
	}
}

func (w *writer) since(i int) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.rows[i:]...)
}

// sentinels is how many rows end some phases: enough that every shard
// gets some (all 16 sequential ids hash to one of two shards with a chance
// of 2^-15), for checks that want rows from every shard.
const sentinels = 16

// errorReporter is the part of testing.TB the checks use.
type errorReporter interface {
	Helper()
	Errorf(format string, args ...any)
}

// checkExactlyOnce asserts got holds exactly want (each once) and that per
// shard, rows arrive in commit (= insertion) order. End markers (readUntil's,
// written to the same table by other reads of the test) are not rows under
// test and are passed over.
func checkExactlyOnce(t errorReporter, name string, got []ev, want []string) {
	t.Helper()
	order := map[string]int{}
	for i, e := range want {
		order[e] = i
	}
	seen := map[string]int{}
	lastPerShard := map[string]int{}
	for _, e := range got {
		email := e.str("email")
		if strings.HasSuffix(email, markerSuffix) {
			continue
		}
		seen[email]++
		idx, ok := order[email]
		if !ok {
			t.Errorf("%s: unexpected row %s (op %s, shard %s)", name, email, e.Op, e.Shard)
			continue
		}
		if last, ok := lastPerShard[e.Shard]; ok && idx < last {
			t.Errorf("%s: row %s on shard %s arrived after a later row", name, email, e.Shard)
		}
		lastPerShard[e.Shard] = idx
	}
	missing := 0
	for _, e := range want {
		switch seen[e] {
		case 1:
		case 0:
			missing++
			if missing <= 5 {
				t.Errorf("%s: missing row %s", name, e)
			}
		default:
			t.Errorf("%s: row %s delivered %d times", name, e, seen[e])
		}
	}
	if missing > 0 {
		t.Errorf("%s: %d of %d rows missing", name, missing, len(want))
	}
}

// waitAcked waits until the subscriber's stored cursor is cursor. It
// returns an error rather than failing the test: readers call it from
// goroutines of their own.
func waitAcked(ctx context.Context, g *gateway, stream, sub, cursor string) error {
	return eventuallyCtx(ctx, 30*time.Second, "subscriber "+sub+" to store its cursor", func() error {
		var out struct {
			Cursor string `json:"cursor"`
		}
		status, err := g.do(ctx, "GET", "/v1/streams/"+stream+"/subscribers/"+sub, nil, &out)
		switch {
		case err != nil:
			return err
		case status != 200:
			return fmt.Errorf("status %d", status)
		case out.Cursor != cursor:
			return fmt.Errorf("stored cursor %q", out.Cursor)
		}
		return nil
	})
}

// initialCursor asks the stream for its current position.
func initialCursor(t *testing.T, ctx context.Context, g *gateway, stream string) string {
	t.Helper()
	var out struct {
		NextCursor string `json:"next_cursor"`
	}
	status, err := g.do(ctx, "GET", "/v1/streams/"+stream+"/changes", nil, &out)
	if err != nil || status != 200 || out.NextCursor == "" {
		t.Fatalf("initial cursor: %d %v %+v", status, err, out)
	}
	return out.NextCursor
}

type seedClient struct {
	name      string
	transport string
	named     bool
	stream    string
	sub       string
	cursor    string // where the client resumes (anonymous), after phase A
}

// TestSeedReshardResume is the seed scenario, through every transport, for
// named subscribers and anonymous cursor holders at once: read some rows and
// ack, go away, reshard customer 0 -> -80,80- and switch traffic (old shard
// still present) with rows inserted before, during and after, come back:
// every row after the last ack arrives exactly once, in order per shard.
func TestSeedReshardResume(t *testing.T) {
	needE2E(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	freshCluster(t, ctx)
	g := startGateway(t, withRedis(t)...)
	w := newWriter(t, "seed"+strconv.FormatInt(time.Now().UnixNano()%1e6, 10))

	var clients []*seedClient
	for _, tr := range []string{"pull", "sse", "ws"} {
		for _, named := range []bool{true, false} {
			name := tr + "-anon"
			if named {
				name = tr + "-named"
			}
			stream := "seed-" + name
			g.createStream(t, map[string]any{"name": stream, "keyspace": "customer", "tables": []string{"customer"}})
			c := &seedClient{name: name, transport: tr, named: named, stream: stream}
			c.cursor = initialCursor(t, ctx, g, stream)
			if named {
				c.sub = "sub-" + name
				var out map[string]any
				if st, err := g.do(ctx, "POST", "/v1/streams/"+stream+"/subscribers/"+c.sub+"/ack", map[string]string{"cursor": c.cursor}, &out); err != nil || st != 200 {
					t.Fatalf("%s: initial ack: %d %v", name, st, err)
				}
			}
			clients = append(clients, c)
		}
	}

	// Phase A: 10 rows; every client reads them and acks (or keeps) the 5th.
	if err := w.insert(ctx, "a", 10); err != nil {
		t.Fatal(err)
	}
	if err := w.insert(ctx, "a-sentinel", sentinels); err != nil {
		t.Fatal(err)
	}
	phaseA := w.since(0)
	end := newReadEnd(len(clients))
	var wg sync.WaitGroup
	for _, c := range clients {
		wg.Add(1)
		go func(c *seedClient) {
			defer wg.Done()
			cursor := ""
			if !c.named {
				cursor = c.cursor
			}
			cl, err := transports[c.transport](ctx, g, c.stream, c.sub, cursor)
			if err != nil {
				t.Errorf("%s: connect: %v", c.name, err)
				end.skip()
				return
			}
			defer cl.close()
			got, err := readTo(ctx, cl, phaseA, end, nil)
			if err != nil {
				t.Errorf("%s: phase A read: %v", c.name, err)
				return
			}
			// One shard: got is in commit order, got[4] the 5th row written.
			checkExactlyOnce(t, c.name+" phase A", got, phaseA)
			if len(got) < 5 {
				return
			}
			fifth := got[4].Cursor
			if c.named {
				if err := cl.ack(ctx, fifth); err != nil {
					t.Errorf("%s: ack: %v", c.name, err)
					return
				}
				if err := waitAcked(ctx, g, c.stream, c.sub, fifth); err != nil {
					t.Errorf("%s: %v", c.name, err)
				}
			} else {
				c.cursor = fifth
			}
		}(c)
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}

	// Phase B: rows before, during and after the reshard while everyone is away.
	if err := w.insert(ctx, "before", 20); err != nil {
		t.Fatal(err)
	}
	if err := cluster.AddShards(ctx, "customer", []string{"-80", "80-"}); err != nil {
		t.Fatal(err)
	}
	during, stopDuring := context.WithCancel(ctx)
	duringErr := make(chan error, 1)
	go func() {
		for during.Err() == nil {
			if err := w.insert(ctx, "during", 1); err != nil {
				duringErr <- err
				return
			}
		}
		duringErr <- nil
	}()
	if err := cluster.Reshard(ctx, "customer", "cust2cust", "0", "-80,80-"); err != nil {
		t.Fatal(err)
	}
	stopDuring()
	if err := <-duringErr; err != nil {
		t.Fatal(err)
	}
	if err := cluster.SwitchTraffic(ctx, "customer", "cust2cust"); err != nil {
		t.Fatal(err)
	}
	if err := w.insert(ctx, "after", 20); err != nil {
		t.Fatal(err)
	}
	if err := w.insert(ctx, "sentinel", sentinels); err != nil {
		t.Fatal(err)
	}
	want := w.since(5) // everything after the 5th row of phase A
	t.Logf("%d rows to resume: %d inserted during the reshard copy", len(want), len(want)-5-sentinels-20-20-sentinels)

	// Phase C: everyone comes back.
	end = newReadEnd(len(clients))
	for _, c := range clients {
		wg.Add(1)
		go func(c *seedClient) {
			defer wg.Done()
			cursor := ""
			if !c.named {
				cursor = c.cursor
			}
			start := time.Now()
			cl, err := transports[c.transport](ctx, g, c.stream, c.sub, cursor)
			if err != nil {
				t.Errorf("%s: reconnect: %v", c.name, err)
				end.skip()
				return
			}
			defer cl.close()
			got, err := readTo(ctx, cl, want, end, nil)
			if err != nil {
				t.Errorf("%s: resume read after %d rows: %v", c.name, len(got), err)
				return
			}
			shards := map[string]int{}
			for _, e := range got {
				shards[e.Shard]++
			}
			t.Logf("%s: %d rows in %v, by shard %v", c.name, len(got), time.Since(start).Round(time.Millisecond), shards)
			checkExactlyOnce(t, c.name+" resume", got, want)
			if shards["-80"]+shards["80-"] == 0 {
				t.Errorf("%s: no rows from the new shards", c.name)
			}
		}(c)
	}
	wg.Wait()
}

// customerIDs lists every customer_id in the table, streamed (OLAP): the
// table outgrows vttablet's 10,000-row limit for ordinary queries.
func customerIDs(t *testing.T, ctx context.Context) []string {
	t.Helper()
	db, err := cluster.OpenDB("customer")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "set workload = 'olap'"); err != nil {
		t.Fatal(err)
	}
	rows, err := conn.QueryContext(ctx, "select customer_id from customer")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return ids
}
