package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"vitess.io/vitess/go/sqltypes"
	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"

	"github.com/vstream-gateway/vstream-gateway/auth"
	"github.com/vstream-gateway/vstream-gateway/client"
	"github.com/vstream-gateway/vstream-gateway/internal/fakevtgate"
	"github.com/vstream-gateway/vstream-gateway/server"
)

// The tests run the whole gateway (server.New, as the binary builds it)
// on an embedded store, over a fake vtgate that serves a fake binlog: one
// shard of keyspace customer, transaction n ending at MariaDB/0-1-n and
// inserting customers with ids counting up from first+1 (one per
// transaction but for those appendTxn makes). Every VStream call,
// whatever its position, gets the transactions after it, then those
// appended later.

const ks = "customer"

var s0 = fakevtgate.Shard{Keyspace: ks, Name: "0"}

func at(n int) *binlogdatapb.VGtid { return fakevtgate.VGtid(ks, "0", "MariaDB/0-1-"+strconv.Itoa(n)) }

// first is the position the binlog starts at: its first transaction is
// first+1.
const first = 10

type binlog struct {
	mu      sync.Mutex
	txns    [][]int // the row ids of transaction first+1+i
	changed chan struct{}
}

func newBinlog() *binlog { return &binlog{changed: make(chan struct{})} }

// append adds n one-row transactions.
func (b *binlog) append(n int) {
	for range n {
		b.appendTxn(1)
	}
}

// appendTxn adds a transaction of rows rows. vtgate streams one of more
// than a row as it does a chunked transaction: a response per row.
func (b *binlog) appendTxn(rows int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	id := first
	if n := len(b.txns); n > 0 {
		id = b.txns[n-1][len(b.txns[n-1])-1]
	}
	txn := make([]int, rows)
	for i := range txn {
		txn[i] = id + 1 + i
	}
	b.txns = append(b.txns, txn)
	close(b.changed)
	b.changed = make(chan struct{})
}

// written returns the rows (customer ids) appended so far, in order.
func (b *binlog) written() []int {
	b.mu.Lock()
	defer b.mu.Unlock()
	var ids []int
	for _, txn := range b.txns {
		ids = append(ids, txn...)
	}
	return ids
}

// state returns the position after the last transaction, its
// transactions, and what is closed when one is appended.
func (b *binlog) state() (int, [][]int, chan struct{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return first + len(b.txns), b.txns, b.changed
}

// serve answers every VStream call of fake until ctx ends.
func (b *binlog) serve(ctx context.Context, fake *fakevtgate.Server) {
	var wg sync.WaitGroup
	defer wg.Wait()
	for i := 0; ; i++ {
		call, err := fake.WaitCall(ctx, i)
		if err != nil {
			return
		}
		wg.Add(1)
		go func() { defer wg.Done(); b.answer(ctx, call) }()
	}
}

// answer streams the transactions after the call's position, and those
// appended later, until the call ends. A call for a snapshot (no GTID)
// stays open without an answer: the binlog has no copy phase.
func (b *binlog) answer(ctx context.Context, call *fakevtgate.Call) {
	sg := call.Req.GetVgtid().GetShardGtids()
	if len(sg) != 1 || sg[0].Gtid == "" {
		return
	}
	last, txns, changed := b.state()
	from := last
	if g := sg[0].Gtid; g != "current" {
		n, err := strconv.Atoi(g[strings.LastIndexByte(g, '-')+1:])
		if err != nil {
			panic(fmt.Sprintf("binlog: position %q", g))
		}
		from = n
	}
	field := s0.Field("customer", fakevtgate.BigintPK("customer_id"), fakevtgate.LongText("email"))
	var batches [][]*binlogdatapb.VEvent
	if from >= last {
		batches = [][]*binlogdatapb.VEvent{{s0.Pos(at(from))}}
	}
	for {
		for n := from + 1; n <= last; n++ {
			batches = append(batches, txnBatches(n, txns[n-first-1], field)...)
			field = nil
		}
		if len(batches) > 0 && !call.TryAnswer(fakevtgate.Script{Open: true, Batches: batches}) {
			return
		}
		batches, from = nil, last
		select {
		case <-changed:
			last, txns, changed = b.state()
		case <-call.Done():
			return
		case <-ctx.Done():
			return
		}
	}
}

// txnBatches are the responses of transaction n: one, or for more than a
// row a response per row, as vtgate streams a chunked transaction. field
// (if not nil) goes first.
func txnBatches(n int, ids []int, field *binlogdatapb.VEvent) [][]*binlogdatapb.VEvent {
	ts := time.Now().Unix()
	insert := func(id int) *binlogdatapb.VEvent {
		return s0.Insert("customer", ts, []string{strconv.Itoa(id), fmt.Sprintf("c%d@x", id)})
	}
	head := []*binlogdatapb.VEvent{s0.Begin(ts)}
	if field != nil {
		head = append([]*binlogdatapb.VEvent{field}, head...)
	}
	if len(ids) == 1 {
		return [][]*binlogdatapb.VEvent{append(head, insert(ids[0]), s0.Pos(at(n)), s0.Commit(ts))}
	}
	out := [][]*binlogdatapb.VEvent{head}
	for _, id := range ids {
		out = append(out, []*binlogdatapb.VEvent{insert(id)})
	}
	return append(out, []*binlogdatapb.VEvent{s0.Pos(at(n)), s0.Commit(ts)})
}

// gateway is a running gateway over a fake vtgate and binlog.
type gateway struct {
	url   string
	fake  *fakevtgate.Server
	log   *binlog
	addr  string
	flags []string
	dir   string
	stop  func()
}

// jwtSecret signs the tokens of gateways started withAuth.
const jwtSecret = "client-test-secret-0123456789abcdef"

// withAuth are the flags of a gateway that verifies tokens (HS256 with
// jwtSecret, no leeway: a token is refused as soon as it expires).
var withAuth = []string{"--jwt-secret", jwtSecret, "--jwt-leeway", "0s", "--jwt-cache-size", "0"}

// startGateway starts a gateway with stream "orders" on customer.customer.
func startGateway(t *testing.T, flags ...string) *gateway {
	t.Helper()
	fake := fakevtgate.New(t)
	fake.SetResult("show vitess_keyspaces", sqltypes.MakeTestResult(sqltypes.MakeTestFields("Databases", "varchar"), ks))
	fake.SetResult("select * from `customer` limit 0", sqltypes.MakeTestResult(sqltypes.MakeTestFields("customer_id|email", "int64|varchar")))
	fake.SetCreateTable("customer", "CREATE TABLE `customer` (`customer_id` bigint(20) NOT NULL, `email` longtext, PRIMARY KEY (`customer_id`))")
	fake.SetResult("show tables like 'customer'", sqltypes.MakeTestResult(sqltypes.MakeTestFields("Tables_in_customer", "varchar"), "customer"))
	fake.SetTopology(ks, []string{"0"}, nil)
	g := &gateway{fake: fake, log: newBinlog(), flags: flags, dir: filepath.Join(t.TempDir(), "data")}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan struct{})
	go func() { defer close(served); g.log.serve(ctx, fake) }()
	t.Cleanup(func() { cancel(); <-served })
	g.start(t)
	t.Cleanup(func() { g.stop() })
	admin := ""
	if g.authOn() {
		admin = mint(t, "ops", time.Hour, func(c *auth.Claims) { c.Scope = "admin" })
	}
	status, body := g.do(t, "POST", "/v1/streams", admin, `{"name":"orders","keyspace":"customer","tables":["customer"]}`)
	if status != http.StatusCreated {
		t.Fatalf("create stream: %d %s", status, body)
	}
	return g
}

func (g *gateway) authOn() bool {
	for _, f := range g.flags {
		if f == "--jwt-secret" {
			return true
		}
	}
	return false
}

// start runs the gateway (again, on the same address and store).
func (g *gateway) start(t *testing.T) {
	t.Helper()
	args := []string{"--vtgate", g.fake.Addr, "--data-dir", g.dir, "--max-conns-per-token", "0",
		"--stall-timeout", "0", "--primary-poll", "0", "--shutdown-grace", "5s"}
	if !g.authOn() {
		args = append(args, "--insecure-no-auth")
	}
	cfg, err := server.ParseFlags(append(args, g.flags...), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	s, err := server.New(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	addr := g.addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	g.addr = l.Addr().String()
	g.url = "http://" + g.addr
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.Serve(ctx, l) }()
	g.stop = func() { cancel(); <-done }
}

// restart stops the gateway gracefully (its clients are closed with
// 4001 shutdown) and starts it again.
func (g *gateway) restart(t *testing.T) {
	t.Helper()
	g.stop()
	g.start(t)
}

// do sends a request with an optional token and returns the status and
// body.
func (g *gateway) do(t *testing.T, method, path, token, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, g.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// storedCursor is the subscriber's cursor stored by the gateway ("" if
// none).
func (g *gateway) storedCursor(t *testing.T, sub string) string {
	t.Helper()
	status, body := g.do(t, "GET", "/v1/streams/orders/subscribers/"+sub, "", "")
	if status == http.StatusNotFound {
		return ""
	}
	var s struct{ Cursor string }
	if status != http.StatusOK || json.Unmarshal([]byte(body), &s) != nil {
		t.Fatalf("subscriber %s: %d %s", sub, status, body)
	}
	return s.Cursor
}

// quiet is a logger for clients under test.
func quiet() client.Option {
	return client.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
}

// dial dials the gateway's stream "orders" with a short test timeout.
func dial(t *testing.T, url string, opts ...client.Option) *client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, url, "orders", append([]client.Option{quiet(), client.WithBackoff(10*time.Millisecond, 200*time.Millisecond)}, opts...)...)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// rowID is the customer_id of a change.
func rowID(t *testing.T, ch *client.Change) int {
	t.Helper()
	var row struct {
		ID int `json:"customer_id"`
	}
	if err := json.Unmarshal(ch.Row(), &row); err != nil {
		t.Fatalf("row %s: %v", ch.Row(), err)
	}
	return row.ID
}

// readRows reads transactions until every id of want has arrived and
// returns the ids read, in order, repeats included; last is the last
// transaction read.
func readRows(t *testing.T, c *client.Client, want []int) (got []int, last *client.Txn) {
	t.Helper()
	missing := map[int]bool{}
	for _, id := range want {
		missing[id] = true
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for len(missing) > 0 {
		txn, err := c.Next(ctx)
		if err != nil {
			t.Fatalf("next (%d rows missing): %v", len(missing), err)
		}
		for _, ch := range txn.Changes() {
			id := rowID(t, ch)
			got = append(got, id)
			delete(missing, id)
		}
		last = txn
	}
	return got, last
}

// exactlyOnce checks got is want, in order, each once.
func exactlyOnce(t *testing.T, what string, got, want []int) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d rows, want %d", what, len(got), len(want))
	}
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			t.Fatalf("%s: row %d is %d, want %d (got %v)", what, i, got[i], want[i], got)
		}
	}
}

var errNotYet = errors.New("not yet")

// mint returns an HS256 token for sub, reading every stream and table,
// valid for ttl, changed by edit.
func mint(t testing.TB, sub string, ttl time.Duration, edit func(*auth.Claims)) string {
	t.Helper()
	now := time.Now()
	c := &auth.Claims{
		RegisteredClaims: jwt.RegisteredClaims{Subject: sub, ExpiresAt: jwt.NewNumericDate(now.Add(ttl)), IssuedAt: jwt.NewNumericDate(now)},
		Streams:          []string{"*"},
		Tables:           []string{"*"},
	}
	if edit != nil {
		edit(c)
	}
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString([]byte(jwtSecret))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// metric is the value of one sample of the gateway's /metrics (name with
// its labels, as exposed), 0 when absent.
func metric(t *testing.T, g *gateway, sample string) float64 {
	t.Helper()
	status, body := g.do(t, "GET", "/metrics", "", "")
	if status != http.StatusOK {
		t.Fatalf("/metrics: %d", status)
	}
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, sample+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return 0
}
