package e2e

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vstream-gateway/vstream-gateway/internal/wait"
)

// Huge transactions (DESIGN §3.1): one transaction of hundreds of MiB of
// row images, far larger than --read-ahead, the ring and the WebSocket
// queue, read over WebSocket, SSE and a webhook by a gateway under a hard
// memory limit; and the gateway killed in the middle of sending one. Slow
// (minutes: the transaction is written, binlogged, streamed by vttablet and
// vtgate and read three times on two cores), so they run only with
// VSG_FAULTS=1 (make test-faults). VSG_BIGTXN_ROWS sets the rows of 4,000
// bytes (default 131,072: 512 MiB of row images).

const (
	bigPad      = 4000
	bigMemLimit = 256 << 20
)

func bigRows(t *testing.T) int {
	if s := os.Getenv("VSG_BIGTXN_ROWS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 10 {
			t.Fatalf("VSG_BIGTXN_ROWS=%q", s)
		}
		return n
	}
	return 131072
}

// bigSetup makes an empty table bigtxn in the unsharded commerce keyspace
// (MariaDB's seq_1_to_N engine writes the transaction in one statement,
// through vtgate) and a limited gateway with a stream of it, a WebSocket
// and an SSE subscriber and a webhook, all caught up on a first row (id 0).
type bigRun struct {
	t       *testing.T
	g       *gateway
	db      *sql.DB
	stream  string
	how     string
	peak    func() int64
	ws, sse *txnLedger
	wh      *txnLedger
	recv    *bigReceiver
	cancel  context.CancelFunc
	readers sync.WaitGroup
	n       int
	hwm     int64
	hwmMu   sync.Mutex
	stopHWM chan struct{}
	hwmDone chan struct{}
}

func bigSetup(t *testing.T, n int, flags ...string) *bigRun {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	db, err := cluster.OpenDB("commerce")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	for _, q := range []string{"drop table if exists bigtxn", "create table bigtxn (id bigint not null primary key, pad mediumtext) engine=innodb"} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	r := &bigRun{t: t, db: db, n: n, ws: &txnLedger{name: "websocket"}, sse: &txnLedger{name: "sse"}, wh: &txnLedger{name: "webhook"}}
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	r.g = &gateway{t: t, url: fmt.Sprintf("http://127.0.0.1:%d", port), args: append([]string{
		"--listen", "127.0.0.1:" + strconv.Itoa(port), "--vtgate", cluster.VtgateAddr(), "--insecure-no-auth",
	}, append(whGatewayFlags(t), flags...)...)}
	// The Go runtime collects before the hard limit is reached; the limit
	// is what the kernel enforces.
	r.g.env = []string{"GOMEMLIMIT=200MiB"}
	r.how, r.peak = memoryLimit(t, r.g, bigMemLimit)
	r.g.start()
	t.Cleanup(func() { r.g.stop(syscall.SIGTERM) })
	r.stream = uniqueName("bigtxn")
	r.g.createStream(t, map[string]any{"name": r.stream, "keyspace": "commerce", "tables": []string{"bigtxn"}})
	r.recv = newBigReceiver(t, r.wh)
	createWebhook(t, r.g, r.stream, map[string]any{"url": r.recv.srv.URL + "/hook", "secret": newSecret(), "max_attempts": 1000, "timeout": "10s", "batch_max_events": 500})

	rctx, rcancel := context.WithCancel(context.Background())
	r.cancel = rcancel
	url := func() string { return r.g.url }
	r.readers.Add(2)
	go func() { defer r.readers.Done(); runWS(rctx, url, r.stream, "bigws", r.ws) }()
	go func() { defer r.readers.Done(); runSSE(rctx, url, r.stream, "bigsse", r.sse) }()
	t.Cleanup(func() { rcancel(); r.readers.Wait() })

	// Every reader is live (and its subscriber has a cursor) before the
	// transaction is written: a first row each must see.
	if _, err := db.ExecContext(ctx, "insert into bigtxn (id, pad) values (0, 'first')"); err != nil {
		t.Fatal(err)
	}
	r.waitLast(0, 2*time.Minute)
	return r
}

// waitLast waits until every reader committed id last.
func (r *bigRun) waitLast(last int64, d time.Duration) {
	r.t.Helper()
	err := eventuallyCtx(context.Background(), d, fmt.Sprintf("every reader to commit row %d", last), func() error {
		select {
		case <-r.g.done:
			return wait.Abort(fmt.Errorf("the gateway exited:\n%s", tailOf(r.g.log.String(), 4000)))
		default:
		}
		for _, l := range []*txnLedger{r.ws, r.sse, r.wh} {
			c, p, got := l.state()
			if got < last {
				return fmt.Errorf("%s: %d committed (last id %d), %d pending", l.name, c, got, p)
			}
		}
		return nil
	})
	if err != nil {
		r.t.Fatal(err)
	}
}

// sampleHWM follows the gateway's peak RSS until stopped (VmHWM is gone
// once the process exits).
func (r *bigRun) sampleHWM() {
	r.stopHWM, r.hwmDone = make(chan struct{}), make(chan struct{})
	pid := r.g.cmd.Process.Pid
	go func() {
		defer close(r.hwmDone)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			if v := vmHWM(pid); v > 0 {
				r.hwmMu.Lock()
				r.hwm = max(r.hwm, v)
				r.hwmMu.Unlock()
			}
			select {
			case <-r.stopHWM:
				return
			case <-tick.C:
			}
		}
	}()
}

func (r *bigRun) peakRSS() int64 {
	close(r.stopHWM)
	<-r.hwmDone
	r.hwmMu.Lock()
	defer r.hwmMu.Unlock()
	return r.hwm
}

// writeBig writes rows 1..n in one transaction (one statement).
func (r *bigRun) writeBig(ctx context.Context) error {
	_, err := r.db.ExecContext(ctx, fmt.Sprintf("insert into bigtxn (id, pad) select seq, repeat('x', %d) from seq_1_to_%d", bigPad, r.n))
	return err
}

// finish writes a last row and checks that every reader committed rows
// 0..n+1 exactly once, in order.
func (r *bigRun) finish(ctx context.Context, d time.Duration) {
	r.t.Helper()
	if _, err := r.db.ExecContext(ctx, fmt.Sprintf("insert into bigtxn (id, pad) values (%d, 'last')", r.n+1)); err != nil {
		r.t.Fatal(err)
	}
	r.waitLast(int64(r.n+1), d)
	want := make([]int64, r.n+2)
	for i := range want {
		want[i] = int64(i)
	}
	for _, l := range []*txnLedger{r.ws, r.sse, r.wh} {
		if err := l.check(want); err != nil {
			r.t.Error(err)
		}
		if l.err != nil {
			r.t.Error(l.name, l.err)
		}
	}
}

func tailOf(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// TestHugeTransactionUnderMemoryLimit: one transaction of n rows of 4,000
// bytes (512 MiB by default) reaches a WebSocket, an SSE reader and a
// webhook, every row once and in order, with one cursor — at its end —
// while the gateway runs under a 256 MiB hard limit. Slow: minutes.
func TestHugeTransactionUnderMemoryLimit(t *testing.T) {
	needFaults(t)
	n := bigRows(t)
	r := bigSetup(t, n)
	r.sampleHWM()
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	start := time.Now()
	if err := r.writeBig(ctx); err != nil {
		t.Fatal(err)
	}
	written := time.Since(start)
	r.finish(ctx, 20*time.Minute)
	took := time.Since(start)
	rss := r.peakRSS()
	var cgPeak int64
	if r.peak != nil {
		cgPeak = r.peak()
	}
	for _, l := range []*txnLedger{r.ws, r.sse, r.wh} {
		// Three transactions, three cursors: none inside the big one.
		if l.cursors != 3 || l.restarts != 0 {
			t.Errorf("%s: %d cursors, %d restarts (%v); want 3 and 0", l.name, l.cursors, l.restarts, l.why)
		}
	}
	repeated, parts, maxBody := r.recv.repeatedIDs()
	if parts < 2 {
		t.Errorf("webhook: %d part batches; the transaction was not split", parts)
	}
	mib := float64(n*bigPad) / (1 << 20)
	t.Logf("RESULT huge transaction: %d rows, %.0f MiB of row images, written in %v, read by all three in %v (%.1f MiB/s each); "+
		"gateway peak RSS (VmHWM) %.1f MiB, cgroup peak %.1f MiB, limit %d MiB via %s with GOMEMLIMIT=200MiB; webhook: %d parts, largest body %.1f MiB, %d ids repeated",
		n, mib, written.Round(time.Millisecond), took.Round(time.Millisecond), mib/took.Seconds(),
		float64(rss)/(1<<20), float64(cgPeak)/(1<<20), bigMemLimit>>20, r.how, parts, float64(maxBody)/(1<<20), repeated)
	if rss > bigMemLimit {
		t.Errorf("peak RSS %d above the limit %d", rss, bigMemLimit)
	}
}

// TestHugeTransactionGatewayKilled: the gateway is killed (SIGKILL) while
// it sends a huge transaction to a WebSocket, an SSE reader and a webhook,
// each part-way through it, and started again. Each reader resumes from
// its last cursor, before the transaction, and gets it again whole: the
// rows it committed (at cursors) are every row exactly once, in order.
// Slow: minutes.
func TestHugeTransactionGatewayKilled(t *testing.T) {
	needFaults(t)
	n := bigRows(t)
	// The WebSocket reader stops reading for a while below: it must not be
	// closed as a slow consumer meanwhile.
	r := bigSetup(t, n, "--ws-slow-after", "10m")
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	// The readers go at their own paces (each may fall off the tail's
	// history onto a VStream of its own), and one could finish the
	// transaction before the slowest is a tenth into it: the WebSocket and
	// SSE readers stop reading a tenth into it until the kill.
	release := make(chan struct{})
	r.ws.holdAt(n/10, release)
	r.sse.holdAt(n/10, release)
	wrote := make(chan error, 1)
	go func() { wrote <- r.writeBig(ctx) }()
	// Every reader is well into the transaction: a tenth of it pending.
	err := eventuallyCtx(ctx, 15*time.Minute, "every reader inside the transaction", func() error {
		for _, l := range []*txnLedger{r.ws, r.sse, r.wh} {
			if _, p, _ := l.state(); p < n/10 {
				return fmt.Errorf("%s: %d rows pending", l.name, p)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	pending := map[string]int{}
	for _, l := range []*txnLedger{r.ws, r.sse, r.wh} {
		_, pending[l.name], _ = l.state()
	}
	r.g.stop(syscall.SIGKILL)
	killedAt := time.Now()
	close(release)
	r.g.start()
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
	r.finish(ctx, 20*time.Minute)
	for _, l := range []*txnLedger{r.ws, r.sse, r.wh} {
		if l.dropped == 0 {
			t.Errorf("%s: nothing dropped: the kill was not inside the transaction", l.name)
		}
	}
	repeated, parts, _ := r.recv.repeatedIDs()
	t.Logf("RESULT gateway killed inside a %d-row transaction (%.0f MiB): pending at the kill ws=%d sse=%d webhook=%d; "+
		"dropped and read again ws=%d sse=%d webhook=%d; all rows exactly once %v after the kill; webhook parts %d, ids received twice %d",
		n, float64(n*bigPad)/(1<<20), pending["websocket"], pending["sse"], pending["webhook"],
		r.ws.dropped, r.sse.dropped, r.wh.dropped, time.Since(killedAt).Round(time.Second), parts, repeated)
}
