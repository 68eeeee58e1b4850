package main

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/url"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// runLoad runs one measurement: readers connect, the writer writes (unless
// idle), the readers drain, and the report is computed.
func runLoad(ctx context.Context, cfg *config, log *slog.Logger) (*Report, error) {
	k := cfg.ws + cfg.sse + cfg.pull
	e, err := newEnv(ctx, cfg, log, k)
	if err != nil {
		return nil, err
	}
	mode := "load"
	if cfg.idle {
		mode = "idle"
	}
	rep := &Report{Target: cfg.target, Run: cfg.run, Mode: mode, K: k, Rate: cfg.rate, Duration: cfg.duration.Seconds(),
		Readers: map[string]int{"ws": cfg.ws, "sse": cfg.sse, "pull": cfg.pull}}

	pr := newProbe(ctx, cfg, log)
	rep.Before = pr.streams(ctx)
	log.Info("before the run", "vtgate_vstreams", rep.Before.VStreams, "binlog_dump_threads", rep.Before.DumpThreads)
	rssBefore := pr.rss()
	stopProbe := pr.start(ctx)
	defer stopProbe()

	conn, db, wl, err := openWriter(ctx, cfg, log)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	defer endDumpThreads(conn, pr, cfg)

	rctx, cancelReaders := context.WithCancel(ctx)
	defer cancelReaders()
	var wg sync.WaitGroup
	readers, ready, err := connectReaders(ctx, rctx, cfg, e, &wg)
	if err != nil {
		return nil, err
	}

	// The window: what the run measures, from the readers' connection to
	// the end of the drain.
	cpuBefore := cpus(pr)
	pullsBefore, gwBefore := e.pullRequests.Load(), gatewayPulls(ctx, cfg)
	winStart := time.Now()
	if cfg.idle {
		hold(ctx, cfg.idleHold)
	} else {
		stopStorm := storm(rctx, readers, cfg.reconnectFrac, cfg.reconnectEvery)
		db.runFor(ctx, cfg.duration)
		log.Info("writer done", "rows", db.n.Load(), "errors", db.errs.Load())
		drainStart := time.Now()
		rep.ReadersBehind = drain(ctx, readers, wl, db.n.Load(), cfg.drain, cfg.drainMax)
		rep.Drain = time.Since(drainStart).Seconds()
		stopStorm()
	}
	rep.Window = time.Since(winStart).Seconds()
	cpuAfter := cpus(pr)
	rep.PullRequests, rep.GatewayPulls = e.pullRequests.Load()-pullsBefore, -1
	if gw := gatewayPulls(ctx, cfg); gw >= 0 && gwBefore >= 0 {
		rep.GatewayPulls = gw - gwBefore
	}
	rep.End = pr.streams(ctx)
	rssEnd := pr.rss()
	stopProbe()
	cancelReaders()
	wg.Wait()

	reportProcesses(rep, pr, cpuBefore, cpuAfter, rssEnd)
	if cfg.idle {
		rep.Idle = &IdleReport{Conns: ready, RSSBeforeMiB: mib(rssBefore[pr.server]), RSSAfterMiB: mib(rssEnd[pr.server])}
		if ready > 0 {
			rep.Idle.PerConnKiB = float64(rssEnd[pr.server]-rssBefore[pr.server]) / 1024 / float64(ready)
		}
	} else {
		account(rep, readers, db, winStart.UnixNano())
	}
	reportReaders(rep, readers)
	return rep, nil
}

// newProbe finds the processes the run watches and, if asked, waits for
// the cluster to settle before the run counts its VStreams.
func newProbe(ctx context.Context, cfg *config, log *slog.Logger) *probe {
	pr := &probe{server: findPid(cfg.serverPid, cfg.serverName, log), aux: cfg.auxPid, log: log,
		vt: vtctld{bin: cfg.vtctldclient, server: cfg.vtctldAddr}, varsURL: cfg.varsURL}
	pr.rssPeak, pr.dumpPeak = map[int]int64{}, map[string]int{}
	if cfg.settle {
		pr.settle(ctx, cfg.keyspace, 5*time.Second)
	}
	return pr
}

// openWriter connects to vtgate's MySQL port and, unless the run is idle,
// makes the writer and the log of what it writes. The connection is the
// caller's to close, whatever the run.
func openWriter(ctx context.Context, cfg *config, log *slog.Logger) (*sql.DB, *writer, *writeLog, error) {
	conn, err := openDB(cfg.mysql, cfg.mysqlUser, cfg.keyspace, cfg.writers)
	if err != nil {
		return nil, nil, nil, err
	}
	if err := conn.PingContext(ctx); err != nil {
		conn.Close()
		return nil, nil, nil, fmt.Errorf("vtgate MySQL %s: %w", cfg.mysql, err)
	}
	if cfg.idle {
		return conn, nil, nil, nil
	}
	wl := newWriteLog(capacity(cfg.rate, cfg.duration))
	return conn, &writer{db: conn, run: cfg.run, table: cfg.table, rate: cfg.rate, conns: cfg.writers, log: log, wl: wl}, wl, nil
}

// newEnv is what every reader of the run shares: where and what to read,
// the HTTP clients of its transports, and where its latencies go.
func newEnv(ctx context.Context, cfg *config, log *slog.Logger, k int) (*env, error) {
	u, _ := url.Parse(cfg.url)
	e := &env{
		target: cfg.target, addr: u.Host, stream: cfg.stream, token: cfg.token,
		marker: rowMarker(cfg.run), lat: &hist{}, firstLat: &hist{}, arrLat: &hist{},
		first: make([]atomic.Bool, int(cfg.rate*cfg.duration.Seconds()*1.5)+1024), pullWait: cfg.pullWait, batchTxn: cfg.batchTxn,
		log: log, ready: make(chan int, k),
	}
	if cfg.target == "centrifugo" {
		tok, err := centrifugoToken(cfg.cfSecret, "vsg-load", cfg.readyTimeout+cfg.duration+cfg.drainMax+10*time.Minute)
		if err != nil {
			return nil, err
		}
		e.token = tok
	}
	if cfg.sse > 0 {
		e.sse = newSSEClient()
	}
	if cfg.pull > 0 {
		e.pull = newPullClient(cfg.pull)
		e.pullBase = strings.TrimSuffix(cmp(cfg.pullURL, cfg.url), "/")
		if cfg.pullInStep {
			c, err := headCursor(ctx, e)
			if err != nil {
				return nil, err
			}
			e.pullStart = c
		}
	}
	return e, nil
}

// endDumpThreads ends the readers' binlog dump threads: the readers'
// VStreams leave them on the shared cluster's primaries until each has
// something to send, and thousands of them hold MariaDB's connections
// (max_connections) from everyone else. A few rows (on every shard, with
// luck of the hash) and a binlog rotation end them.
func endDumpThreads(conn *sql.DB, pr *probe, cfg *config) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range 16 {
		conn.ExecContext(ctx, fmt.Sprintf("insert into %s(email) values (?)", cfg.table), fmt.Sprintf("load-%s-end%d@x", cfg.run, i))
	}
	pr.settle(ctx, cfg.keyspace, 10*time.Second)
}

// connectReaders starts the run's readers, at most connectConcurrency at a
// time still waiting to learn their position, and waits for them to be
// ready; it returns them and how many are.
func connectReaders(ctx, rctx context.Context, cfg *config, e *env, wg *sync.WaitGroup) ([]*reader, int, error) {
	k := cfg.ws + cfg.sse + cfg.pull
	readers := make([]*reader, 0, k)
	sem := make(chan struct{}, max(1, cfg.connectConcurrency))
	start := time.Now()
	for i := range k {
		kind, s := "ws", session(wsSession)
		switch {
		case cfg.target == "centrifugo":
			kind, s = "cf", cfSession
		case i >= cfg.ws+cfg.sse:
			kind, s = "pull", pullSession
		case i >= cfg.ws:
			kind, s = "sse", sseSession
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			return readers, 0, ctx.Err()
		}
		r := &reader{id: i, kind: kind, env: e, t: newTally()}
		r.release = sync.OnceFunc(func() { <-sem })
		time.AfterFunc(5*time.Second, r.release)
		readers = append(readers, r)
		wg.Add(1)
		go func() { defer wg.Done(); r.run(rctx, s) }()
	}
	// The wait counts from the last reader's launch: launching thousands
	// against a struggling server can itself take longer than the wait.
	waitReady(ctx, e.ready, k, time.Now().Add(cfg.readyTimeout))
	ready := 0
	for _, r := range readers {
		if r.readyAtSafe() != 0 {
			ready++
		}
	}
	e.log.Info("readers connected", "ready", ready, "of", k, "in", time.Since(start).Round(time.Millisecond))
	return readers, ready, nil
}

// reportProcesses fills in what the probe saw of the processes: the
// cluster's and the load tool's CPU over the window, the server's (and
// the auxiliary process's) CPU and memory, the VStreams and dump threads.
func reportProcesses(rep *Report, pr *probe, before, after cpuReading, rssEnd map[int]int64) {
	rep.Cluster = cpuDelta(before.cluster, after.cluster)
	rep.LoadCPU = after.self - before.self
	for _, p := range []struct {
		pid int
		out **ProcReport
	}{{pr.server, &rep.Server}, {pr.aux, &rep.Aux}} {
		if p.pid != 0 {
			*p.out = &ProcReport{Pid: p.pid, RSSPeakMiB: mib(pr.rssPeak[p.pid]), RSSEndMiB: mib(rssEnd[p.pid]),
				CPUSec: after.procs[p.pid] - before.procs[p.pid]}
		}
	}
	pr.mu.Lock()
	rep.VStreamsPeak, rep.DumpPeak, rep.DumpPeakBy = pr.vstreamPeak, pr.dumpPeakSum, pr.dumpPeak
	rep.VstreamersPeak = pr.vstreamerPeak
	pr.mu.Unlock()
	for err := range pr.errs {
		rep.Errors = append(rep.Errors, err)
	}
}

// reportReaders adds up the readers' reconnects and failures, and lists
// their last errors with how many readers had each (sorted, at most 20).
func reportReaders(rep *Report, readers []*reader) {
	errs := map[string]int{}
	for _, r := range readers {
		rep.Reconnects += r.planned.Load()
		rep.Disconnects += r.unplanned.Load()
		rep.ConnectErrors += r.connectErrs.Load()
		rep.RecoveryFailed += r.recoveryFailed.Load()
		rep.Malformed += r.malformed.Load()
		if m := r.lastErr.Load(); m != nil {
			errs[*m]++
		}
	}
	for m, n := range errs {
		rep.Errors = append(rep.Errors, fmt.Sprintf("%d readers: %s", n, m))
	}
	sort.Strings(rep.Errors)
	if len(rep.Errors) > 20 {
		rep.Errors = rep.Errors[:20]
	}
}

// account checks every reader against the writer's log.
func account(rep *Report, readers []*reader, w *writer, writerStart int64) {
	n := w.n.Load()
	rep.RowsWritten = w.committed()
	rep.WriteErrors = w.errs.Load()
	rep.WriterSlipMs = float64(w.slip.Load()) / 1e6
	rep.MinReaderRows = -1
	for _, r := range readers {
		t := r.t
		lr := t.check(w.wl, n)
		_, based := t.baseline(w.wl)
		switch {
		case !based:
			rep.ReadersFailed++
		case t.readyAt != 0 && t.readyAt < writerStart:
			rep.ReadersReady++
		default:
			rep.ReadersLate++
		}
		rep.RowsDelivered += t.rows
		rep.MsgsDelivered += r.msgs.Load()
		rep.Expected += lr.expected
		rep.Lost += lr.lost
		rep.Dups += t.dups
		rep.Foreign += lr.foreign
		if lr.lost > 0 {
			rep.ReadersWithLoss++
			if rep.ReadersWithLoss <= 5 {
				rep.Errors = append(rep.Errors, fmt.Sprintf("reader %d (%s) lost %d of %d rows, e.g. %v", r.id, r.kind, lr.lost, lr.expected, lr.sample))
			}
		}
		if rep.MinReaderRows < 0 || t.rows < rep.MinReaderRows {
			rep.MinReaderRows = t.rows
		}
	}
	if rep.Window > 0 {
		rep.RowsPerSec = float64(rep.RowsDelivered) / rep.Window
		rep.RowsPerSecRdr = rep.RowsPerSec / float64(len(readers))
	}
	e := readers[0].env
	rep.LatencyP50, rep.LatencyP99, rep.LatencyMax = e.lat.summary()
	var ins hist
	for seq := int64(0); seq < n; seq++ {
		if w.wl.ok[seq] {
			ins.record(time.Duration(w.wl.done[seq] - w.wl.sent[seq]))
		}
	}
	rep.InsertP50, rep.InsertP99, rep.InsertMax = ins.summary()
	rep.FirstP50, rep.FirstP99, rep.FirstMax = e.firstLat.summary()
	if e.arrLat.count() > 0 {
		rep.ArrivalP50, rep.ArrivalP99, rep.ArrivalMax = e.arrLat.summary()
	}
}

// waitReady counts readers as they learn their position, until all k have
// or the deadline passes.
func waitReady(ctx context.Context, ready <-chan int, k int, deadline time.Time) int {
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	n := 0
	for n < k {
		select {
		case <-ready:
			n++
		case <-t.C:
			return n
		case <-ctx.Done():
			return n
		}
	}
	return n
}

func hold(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// storm kicks a random fraction of the readers every period: each closes
// its connection and resumes from its position.
func storm(ctx context.Context, readers []*reader, frac float64, every time.Duration) (stop func()) {
	n := int(frac*float64(len(readers)) + 0.5)
	if n == 0 {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			for _, i := range rand.Perm(len(readers))[:n] {
				readers[i].kick()
			}
		}
	}()
	return func() { cancel(); <-done }
}

// drain waits until every reader that knew its position has as many
// distinct rows as were committed after it did; or until no reader has
// received anything for idle (rows still coming in are late, not lost:
// a saturated server may deliver them long after the writer stopped); or
// until limit. It returns how many readers were still short.
func drain(ctx context.Context, readers []*reader, wl *writeLog, n int64, idle, limit time.Duration) int {
	want := make([]int64, len(readers))
	for i, r := range readers {
		ra := r.readyAtSafe()
		if ra == 0 {
			continue
		}
		for seq := range n {
			if wl.ok[seq] && wl.sent[seq] > ra {
				want[i]++
			}
		}
	}
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	end := time.Now().Add(limit)
	lastProgress, lastTotal := time.Now(), int64(-1)
	for {
		short, total := 0, int64(0)
		for i, r := range readers {
			u := r.uniq.Load()
			total += u
			if u < want[i] {
				short++
			}
		}
		if total != lastTotal {
			lastTotal, lastProgress = total, time.Now()
		}
		if short == 0 || time.Since(lastProgress) > idle || time.Now().After(end) {
			return short
		}
		select {
		case <-ctx.Done():
			return short
		case <-t.C:
		}
	}
}

type cpuReading struct {
	procs, cluster map[int]float64
	self           float64
}

func cpus(p *probe) cpuReading {
	c := cpuReading{procs: map[int]float64{}, cluster: clusterCPU()}
	for _, pid := range []int{p.server, p.aux} {
		if pid != 0 {
			c.procs[pid], _ = procCPU(pid)
		}
	}
	c.self, _ = procCPU(os.Getpid())
	return c
}

// findPid is the server's pid: given, or the only process of that name.
func findPid(pid int, name string, log *slog.Logger) int {
	if pid != 0 {
		return pid
	}
	pids := pidsByName(name)
	if len(pids) != 1 {
		log.Warn("server process not found by name: give --server-pid", "name", name, "found", pids)
		return 0
	}
	return pids[0]
}
