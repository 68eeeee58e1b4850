package e2e

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The customer tables' home: where the test moves them from (back to
// commerce) and to again (forward to customer).
const (
	homeKeyspace  = "customer"
	otherKeyspace = "commerce"
)

// globalDB opens vtgate without a default keyspace: unqualified table
// names follow the routing rules, so writes go wherever the table is.
func globalDB(t *testing.T) *sql.DB {
	t.Helper()
	db, err := cluster.OpenDB("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// tablesAtHome makes sure customer and corder are in customer, on one
// shard (an earlier run may have resharded customer or left the tables
// moved): otherwise the cluster is made again.
func tablesAtHome(t *testing.T, ctx context.Context) {
	t.Helper()
	freshCluster(t, ctx)
	db, err := cluster.OpenDB(homeKeyspace)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	err = db.QueryRowContext(ctx, "select count(*) from customer.customer where customer_id < 0").Scan(&n)
	if err == nil {
		// A query of customer.customer follows routing rules: a workflow
		// left behind (a test failed half-way) may route it elsewhere.
		err = noRoutingRules(ctx)
	}
	if err != nil {
		t.Logf("customer tables are not in %s (%v): recreating the cluster", homeKeyspace, err)
		if err := cluster.Down(ctx); err != nil {
			t.Fatal(err)
		}
		if err := cluster.Up(ctx); err != nil {
			t.Fatal(err)
		}
		flushRedis(t, ctx)
	}
}

// noRoutingRules fails while vtctld's routing rules name a table: a
// MoveTables workflow exists (created, switched or reversed).
func noRoutingRules(ctx context.Context) error {
	out, err := runVtctldclient(ctx, "GetRoutingRules")
	if err != nil {
		return fmt.Errorf("GetRoutingRules: %v: %s", err, out)
	}
	var rr struct {
		Rules []struct {
			FromTable string `json:"from_table"`
		} `json:"rules"`
	}
	if err := json.Unmarshal(out, &rr); err != nil {
		return fmt.Errorf("GetRoutingRules: %v: %s", err, out)
	}
	if len(rr.Rules) > 0 {
		return fmt.Errorf("routing rules still route %d tables (%s, …): a workflow was left behind", len(rr.Rules), rr.Rules[0].FromTable)
	}
	return nil
}

// moveWriter inserts customers one per transaction, without pause while
// inserts succeed (or every `every`), until stopped; started again, it
// goes on numbering where it stopped. An insert that fails may still have
// committed (a switch cuts writes off at any point): it is remembered as
// uncertain and settled by a look-up at the end. Failures back off (a
// switch refuses writes for a second or two; hammering vtgate then only
// slows the cluster).
type moveWriter struct {
	db        *sql.DB
	tag       string
	mu        sync.Mutex
	rows      []string
	uncertain []string
	errs      int
	n         atomic.Int64
	next      int // number of the next email
	// every paces the inserts (0: none); id, if set, gives each row its
	// customer_id rather than the keyspace's sequence (the soak moves the
	// table to a keyspace where it would get MySQL's auto_increment,
	// which goes on from the highest id: the end markers' range).
	every time.Duration
	id    func() int64
}

func (w *moveWriter) run(ctx context.Context, stop <-chan struct{}) {
	backoff := time.Duration(0)
	for {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		case <-time.After(max(backoff, w.every)):
		}
		w.mu.Lock()
		email := fmt.Sprintf("%s-%06d@e2e", w.tag, w.next)
		w.next++
		w.mu.Unlock()
		var err error
		if w.id != nil {
			_, err = w.db.ExecContext(ctx, "insert into customer(customer_id, email) values (?, ?)", w.id(), email)
		} else {
			_, err = w.db.ExecContext(ctx, "insert into customer(email) values (?)", email)
		}
		w.mu.Lock()
		if err != nil {
			w.uncertain = append(w.uncertain, email)
			w.errs++
			backoff = min(max(2*backoff, 10*time.Millisecond), 500*time.Millisecond)
		} else {
			w.rows = append(w.rows, email)
			w.n.Add(1)
			backoff = 0
		}
		w.mu.Unlock()
	}
}

// settle returns the rows that were written, in order: the certain ones
// and those uncertain ones the table holds (one IN query).
func (w *moveWriter) settle(t *testing.T, ctx context.Context) []string {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	exists := map[string]bool{}
	if len(w.uncertain) > 0 {
		q := "select email from customer where email in (" + strings.TrimSuffix(strings.Repeat("?,", len(w.uncertain)), ",") + ")"
		args := make([]any, len(w.uncertain))
		for i, e := range w.uncertain {
			args[i] = e
		}
		rows, err := w.db.QueryContext(ctx, q, args...)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var e string
			if err := rows.Scan(&e); err != nil {
				t.Fatal(err)
			}
			exists[e] = true
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		rows.Close()
	}
	all := append(append([]string(nil), w.rows...), w.uncertain...)
	order := func(e string) int {
		i, _ := strconv.Atoi(strings.TrimSuffix(e[strings.LastIndex(e, "-")+1:], "@e2e"))
		return i
	}
	var out []string
	for _, e := range all {
		if !slicesContains(w.uncertain, e) || exists[e] {
			out = append(out, e)
		}
	}
	sortBy(out, order)
	return out
}

func slicesContains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func sortBy(s []string, key func(string) int) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && key(s[j]) < key(s[j-1]); j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

// globalMarkers writes end markers wherever the customer table is.
func globalMarkers(db *sql.DB) func(ctx context.Context, id string) error {
	return func(ctx context.Context, id string) error {
		ids, err := markerIDs()
		if err != nil {
			return err
		}
		q := "insert into customer(customer_id, email) values " + strings.TrimSuffix(strings.Repeat("(?, ?),", len(ids)), ",")
		var args []any
		for i, cid := range ids {
			args = append(args, cid, markerEmail(id, i, len(ids)))
		}
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		_, err = db.ExecContext(ctx, q, args...)
		return err
	}
}

// applyCustomerVSchema gives customer its sharded vschema again (complete
// of the move to commerce removed the tables from it), as a forward
// MoveTables into a sharded keyspace needs.
func applyCustomerVSchema(t *testing.T, ctx context.Context) {
	t.Helper()
	dir, err := vitessModuleDir()
	if err != nil {
		t.Fatal(err)
	}
	out, err := runVtctldclient(ctx, "ApplyVSchema", "--vschema-file", filepath.Join(dir, "examples/local/vschema_customer_sharded.json"), homeKeyspace)
	if err != nil {
		t.Fatalf("ApplyVSchema: %v: %s", err, out)
	}
}

// start has w write until the returned stop is called (stop waits for
// the writer to end; calling it again does nothing, so a test may defer
// it and also stop early); waitRows(n) waits until n more rows are
// written.
func (w *moveWriter) start(t *testing.T, ctx context.Context) (waitRows func(n int64), stop func()) {
	quit := make(chan struct{})
	done := make(chan struct{})
	go func() { defer close(done); w.run(ctx, quit) }()
	var once sync.Once
	stop = func() {
		once.Do(func() { close(quit) })
		<-done
	}
	waitRows = func(n int64) {
		t.Helper()
		target := w.n.Load() + n
		eventually(t, time.Minute, fmt.Sprintf("%d more rows written", n), func() error {
			if w.n.Load() < target {
				return fmt.Errorf("%d written", w.n.Load())
			}
			return nil
		})
	}
	return waitRows, stop
}

// moveReader is a reader online through a MoveTables test: the rows it
// got and the moved events.
type moveReader struct {
	name  string
	p     *pumped
	got   []ev
	moves []movedEvent
	err   error
}

// readMoves reads every reader up to the marker rows written once want
// is all written, recording the moved events each gets, and checks that
// each got every row of want exactly once.
func readMoves(t *testing.T, ctx context.Context, db *sql.DB, readers []*moveReader, want []string) {
	t.Helper()
	end := newReadEnd(len(readers))
	end.write = globalMarkers(db)
	var wg sync.WaitGroup
	for _, r := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.got, r.err = readTo(ctx, r.p.reader(), want, end, func(e ev) {
				if e.Type == "moved" {
					var m movedEvent
					_ = json.Unmarshal(e.Raw, &m)
					r.moves = append(r.moves, m)
				}
			})
		}()
	}
	wg.Wait()
	for _, r := range readers {
		if r.err != nil {
			t.Errorf("%s: %v", r.name, r.err)
		}
		checkExactlyOnce(t, r.name, r.got, want)
	}
}

// movedEvent is the payload of a `moved` control event.
type movedEvent struct {
	Tables []string `json:"tables"`
	From   string   `json:"from"`
	To     string   `json:"to"`
}

// TestMoveTablesFollow moves customer and corder from customer to commerce
// and forward again while rows are written without pause, with readers on
// every transport online throughout: every row arrives once, in order,
// each reader gets one `moved` event per move, and the stream's
// definition names the keyspace its tables are in. (≈ 1-2 min.)
func TestMoveTablesFollow(t *testing.T) {
	needE2E(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	tablesAtHome(t, ctx)
	g := startGateway(t, append(withRedis(t), "--vtctld", cluster.VtctldAddr())...)
	suffix := strconv.FormatInt(time.Now().UnixNano()%1e6, 10)
	stream := "mt-" + suffix
	g.createStream(t, map[string]any{"name": stream, "keyspace": homeKeyspace, "tables": []string{"customer"}})
	db := globalDB(t)
	w := &moveWriter{db: db, tag: "mt" + suffix}

	cur := initialCursor(t, ctx, g, stream)
	connect := map[string]func(context.Context, *gateway, string, string, string) (client, error){
		"ws": connectWS, "sse": connectSSE, "pull": connectPull,
	}
	var readers []*moveReader
	for _, name := range []string{"ws", "sse", "pull"} {
		c, err := connect[name](ctx, g, stream, "", cur)
		if err != nil {
			t.Fatal(err)
		}
		defer c.close()
		p := pump(ctx, c)
		defer p.stop()
		readers = append(readers, &moveReader{name: name, p: p})
	}

	waitRows, stopWriting := w.start(t, ctx)
	waitRows(50)

	type handover struct {
		to       string
		switched time.Time
		rows     int64
	}
	var handovers []handover
	move := func(from, to, wf string) {
		t.Helper()
		if err := cluster.MoveTables(ctx, to, wf, from, "customer,corder"); err != nil {
			t.Fatal(err)
		}
		waitRows(50)
		before, start := w.n.Load(), time.Now()
		if err := cluster.SwitchTraffic(ctx, to, wf); err != nil {
			t.Fatal(err)
		}
		handovers = append(handovers, handover{to: to, switched: start, rows: w.n.Load() - before})
		waitRows(100)
		if err := cluster.Complete(ctx, to, wf); err != nil {
			t.Fatal(err)
		}
		waitRows(50)
	}
	move(homeKeyspace, otherKeyspace, "back"+suffix)
	var def struct {
		Keyspace string `json:"keyspace"`
	}
	if st, err := g.do(ctx, "GET", "/v1/streams/"+stream, nil, &def); err != nil || st != 200 || def.Keyspace != otherKeyspace {
		t.Errorf("after the move: GET stream: %d %v, keyspace %q (want %s)", st, err, def.Keyspace, otherKeyspace)
	}
	applyCustomerVSchema(t, ctx)
	move(otherKeyspace, homeKeyspace, "fwd"+suffix)
	stopWriting()
	want := w.settle(t, ctx)
	t.Logf("%d rows written (%d inserts failed during switches)", len(want), w.errs)

	readMoves(t, ctx, db, readers, want)
	for _, r := range readers {
		if len(r.moves) != 2 || r.moves[0].From != homeKeyspace || r.moves[0].To != otherKeyspace ||
			r.moves[1].From != otherKeyspace || r.moves[1].To != homeKeyspace {
			t.Errorf("%s: moved events %+v, want %s->%s then back", r.name, r.moves, homeKeyspace, otherKeyspace)
		}
	}
	for _, h := range handovers {
		t.Logf("switch to %s: %d rows written during SwitchTraffic", h.to, h.rows)
	}
	for _, h := range handovers {
		if first, ok := readers[0].p.firstFrom(h.to, h.switched); ok {
			t.Logf("first row from %s reached the WebSocket reader %v after SwitchTraffic began", h.to, first.Sub(h.switched).Round(time.Millisecond))
		}
	}
}

// pumped reads a client without pause into memory, noting when each
// event arrived, so that a reader is never a slow consumer while the test
// waits for workflows.
type pumped struct {
	mu   sync.Mutex
	cond *sync.Cond
	q    []ev
	at   []time.Time
	err  error
	stop context.CancelFunc
}

func pump(ctx context.Context, c client) *pumped {
	ctx, cancel := context.WithCancel(ctx)
	p := &pumped{stop: cancel}
	p.cond = sync.NewCond(&p.mu)
	go func() {
		for {
			e, err := c.next(ctx)
			p.mu.Lock()
			if err != nil {
				p.err = err
				p.cond.Broadcast()
				p.mu.Unlock()
				return
			}
			p.q, p.at = append(p.q, e), append(p.at, time.Now())
			p.cond.Broadcast()
			p.mu.Unlock()
		}
	}()
	context.AfterFunc(ctx, func() {
		p.mu.Lock()
		p.cond.Broadcast()
		p.mu.Unlock()
	})
	return p
}

// firstFrom returns when the first change event from keyspace arrived
// after a time.
func (p *pumped) firstFrom(keyspace string, after time.Time) (time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, e := range p.q {
		var k struct {
			Keyspace string `json:"keyspace"`
		}
		if e.Type == "change" && p.at[i].After(after) && json.Unmarshal(e.Raw, &k) == nil && k.Keyspace == keyspace {
			return p.at[i], true
		}
	}
	return time.Time{}, false
}

// reader returns a client that reads the pumped events from the start.
func (p *pumped) reader() client { return &pumpReader{p: p} }

type pumpReader struct {
	p *pumped
	i int
}

func (r *pumpReader) next(ctx context.Context) (ev, error) {
	p := r.p
	stop := context.AfterFunc(ctx, func() {
		p.mu.Lock()
		p.cond.Broadcast()
		p.mu.Unlock()
	})
	defer stop()
	p.mu.Lock()
	defer p.mu.Unlock()
	for r.i >= len(p.q) {
		if p.err != nil {
			return ev{}, p.err
		}
		if ctx.Err() != nil {
			return ev{}, ctx.Err()
		}
		p.cond.Wait()
	}
	e := p.q[r.i]
	r.i++
	return e, nil
}

func (r *pumpReader) ack(context.Context, string) error { return nil }
func (r *pumpReader) close()                            { r.p.stop() }

// vitessModuleDir is where the pinned Vitess module is (its example files).
func vitessModuleDir() (string, error) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "vitess.io/vitess").Output()
	return strings.TrimSpace(string(out)), err
}

// runVtctldclient runs the cluster's vtctldclient.
func runVtctldclient(ctx context.Context, args ...string) ([]byte, error) {
	return exec.CommandContext(ctx, filepath.Join(cluster.BinDir(), "vtctldclient"),
		append([]string{"--server", cluster.VtctldAddr()}, args...)...).CombinedOutput()
}
