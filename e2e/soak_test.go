package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestSoak is the product's promise under a long run (make soak;
// VSG_SOAK=1, VSG_SOAK_CYCLES cycles, default 10): each cycle splits
// customer 0 -> -80,80- and merges it back, then moves customer and
// corder to commerce and back (MoveTables), each step completed once
// /v1/reshards says it is safe to complete — as the README asks of an
// operator: a bridge racing `complete` may lose, and its subscriber then
// gets its on_gap policy, which is correct but not what a soak proves —
// while a
// writer inserts rows without end, readers on every transport read on two
// gateways sharing one Redis — anonymous token holders and acking named
// subscribers, some online throughout, some away across steps — one
// gateway is killed (SIGKILL) mid-cycle and started again, and two
// webhooks deliver (one on a stream with on_gap resync, one with fail).
// After every cycle the writer pauses and every reader, and both webhook
// receivers, must have every row written since it began exactly once: a
// named subscriber from its last stored ack, an anonymous reader from its
// last cursor. The one allowed exception is a resync of an anonymous
// reader whose token was behind a cutover completed while it was away
// (the old shards are gone; the ring may no longer hold it): counted, and
// its snapshot and what follows are checked instead.
func TestSoak(t *testing.T) {
	needE2E(t)
	if os.Getenv("VSG_SOAK") != "1" {
		t.Skip("soak test: VSG_SOAK is not 1 (make soak runs it)")
	}
	cycles := 10
	if v := os.Getenv("VSG_SOAK_CYCLES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("VSG_SOAK_CYCLES=%q: want a positive number", v)
		}
		cycles = n
	}
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute+time.Duration(cycles)*8*time.Minute)
	defer cancel()
	soakCluster(t, ctx)

	s := newSoak(t, ctx)
	for c := 1; c <= cycles; c++ {
		s.cycle(c)
		if t.Failed() {
			t.Fatalf("SOAK: failed in cycle %d", c)
		}
	}
	s.summary(cycles, time.Since(began))
}

// soak is the state of TestSoak.
type soak struct {
	t         *testing.T
	ctx       context.Context
	gws       []*gateway
	stream    string // on_gap resync
	failS     string // on_gap fail
	suffix    string
	w         *moveWriter
	waitRows  func(n int64)
	stopW     func()
	readers   []*soakReader
	hooks     []*soakHook
	cycleN    int
	steps     []string // this cycle's steps and their times
	expResync int      // resyncs the scenario allows (anonymous readers away across a completed cutover)
	missingN  int      // rows missing at the last check, all readers and webhooks
	repeatedN int      // rows repeated
}

// resyncAllowed: only an anonymous reader that goes away across
// cutovers may be resynced.
func (s *soak) resyncAllowed(r *soakReader) bool {
	_, away := awaySteps[slices.Index(s.readers, r)]
	return r.sub == "" && away
}

type soakHook struct {
	name string
	r    *whReceiver
}

func newSoak(t *testing.T, ctx context.Context) *soak {
	flags := whGatewayFlags(t, "--vtctld", cluster.VtctldAddr())
	s := &soak{t: t, ctx: ctx}
	s.gws = []*gateway{startGateway(t, flags...), startGateway(t, flags...)}
	suffix := strconv.FormatInt(time.Now().UnixNano()%1e6, 10)
	s.stream, s.failS, s.suffix = "soak-"+suffix, "soak-fail-"+suffix, suffix
	s.gws[0].createStream(t, map[string]any{"name": s.stream, "keyspace": homeKeyspace, "tables": []string{"customer"}})
	s.gws[0].createStream(t, map[string]any{"name": s.failS, "keyspace": homeKeyspace, "tables": []string{"customer"}, "on_gap": "fail"})
	cur := map[string]string{s.stream: initialCursor(t, ctx, s.gws[0], s.stream), s.failS: initialCursor(t, ctx, s.gws[1], s.failS)}

	// Readers: transport, named or not, stream, gateway. The "away" ones
	// go offline across some steps of each cycle (awaySteps).
	for i, spec := range []struct{ transport, stream, sub string }{
		{"pull", s.stream, ""}, {"sse", s.stream, ""}, {"ws", s.failS, ""},
		{"pull", s.failS, "p"}, {"sse", s.stream, "s"}, {"ws", s.stream, "w"},
		{"pull", s.stream, "away-p"}, {"ws", s.failS, "away-w"},
		{"sse", s.stream, ""}, {"ws", s.stream, ""},
	} {
		kind := "anon"
		if spec.sub != "" {
			kind = "named"
		}
		name := fmt.Sprintf("%s-%s-%d@g%d", spec.transport, kind, i, i%2+1)
		if spec.stream == s.failS {
			name += "(fail)"
		}
		r := newSoakReader(name, spec.transport, spec.stream, spec.sub, i%2, s.gws, cur[spec.stream], 0)
		if spec.sub != "" {
			if err := r.ackHTTP(ctx, cur[spec.stream]); err != nil {
				t.Fatalf("%s: initial ack: %v", name, err)
			}
		}
		s.readers = append(s.readers, r)
	}
	for _, h := range []struct{ name, stream string }{{"webhook", s.stream}, {"webhook(fail)", s.failS}} {
		r := newWhReceiver(t, nil)
		createWebhook(t, s.gws[0], h.stream, map[string]any{
			"url": r.url(), "secret": r.secret, "max_attempts": 1000, "timeout": "2s", "batch_max_events": 100, "cursor": cur[h.stream],
		})
		s.hooks = append(s.hooks, &soakHook{name: h.name, r: r})
	}
	for _, r := range s.readers {
		r.start(ctx)
		t.Cleanup(r.halt)
	}

	db := globalDB(t)
	var id atomic.Int64
	id.Store(1<<50 | rand.Int64N(1<<40))
	s.w = &moveWriter{db: db, tag: "soak" + suffix, every: 20 * time.Millisecond, id: func() int64 { return id.Add(1) }}
	return s
}

// away lists, per reader index, the step before which it goes offline
// and the step after which it comes back (step names of cycle).
var awaySteps = map[int][2]string{
	6: {"split", "merge"},        // named pull: away across split and merge
	7: {"move out", "move home"}, // named WebSocket: across both moves
	8: {"split", "move out"},     // anonymous SSE: across split, merge and a move
	9: {"merge", "move home"},    // anonymous WebSocket: across merge and both moves
}

func (s *soak) step(name string, f func() error) {
	s.t.Helper()
	label := fmt.Sprintf("cycle %d: %s", s.cycleN, name)
	soakStep.Store(label)
	start := time.Now()
	if err := f(); err != nil {
		s.t.Fatalf("SOAK %s: %v", label, err)
	}
	s.steps = append(s.steps, fmt.Sprintf("%s %v", name, time.Since(start).Round(100*time.Millisecond)))
}

// phase runs a named phase of the cycle: readers due away before it go
// offline, those due back after it come back.
func (s *soak) phase(name string, f func()) {
	s.t.Helper()
	for i, a := range awaySteps {
		if a[0] == name {
			r := s.readers[i]
			s.step(r.name+" goes away", func() error { return r.goOffline(s.ctx) })
			s.t.Logf("SOAK %s: %s went away: %s", currentStep(), r.name, s.stored(r))
		}
	}
	f()
	for i, a := range awaySteps {
		if a[1] == name {
			r := s.readers[i]
			if r.sub == "" {
				// Its token is behind the cutovers completed meanwhile:
				// a resync is allowed (when the ring no longer holds it).
				s.expResync++
			}
			s.t.Logf("SOAK %s: %s comes back: %s", currentStep(), r.name, s.stored(r))
			r.start(s.ctx)
		}
	}
}

func (s *soak) cycle(c int) {
	t, ctx := s.t, s.ctx
	s.cycleN, s.steps = c, nil
	begin := time.Now()
	rows0 := len(s.w.rows)
	s.waitRows, s.stopW = s.w.start(t, ctx)
	defer s.stopW()
	s.waitRows(30)
	kill := s.gws[c%2]

	s.phase("split", func() {
		s.step("split: add shards", func() error { return cluster.AddShards(ctx, homeKeyspace, []string{"-80", "80-"}) })
		s.step("split: copy", func() error { return cluster.Reshard(ctx, homeKeyspace, s.wf("split", c), "0", "-80,80-") })
		s.waitRows(30)
		switched := time.Now()
		s.step("split: switch", func() error { return cluster.SwitchTraffic(ctx, homeKeyspace, s.wf("split", c)) })
		// One gateway dies between the switch and complete, often in the
		// middle of the bridges it runs as the journal watcher: its
		// readers reconnect to the other, which takes the watcher's lease,
		// reads the journal again and bridges what was left undone.
		s.step(fmt.Sprintf("kill g%d", c%2+1), func() error { kill.stop(syscall.SIGKILL); return nil })
		s.step("split: bridged", func() error { return s.waitSafe(switched) })
		s.step("split: complete", func() error { return cluster.Complete(ctx, homeKeyspace, s.wf("split", c)) })
		s.step(fmt.Sprintf("restart g%d", c%2+1), func() error { kill.start(); return nil })
		s.waitRows(30)
	})
	s.phase("merge", func() {
		s.step("merge: add shard", func() error { return cluster.AddShards(ctx, homeKeyspace, []string{"0"}) })
		s.step("merge: copy", func() error { return cluster.Reshard(ctx, homeKeyspace, s.wf("merge", c), "-80,80-", "0") })
		s.waitRows(30)
		switched := time.Now()
		s.step("merge: switch", func() error { return cluster.SwitchTraffic(ctx, homeKeyspace, s.wf("merge", c)) })
		s.step("merge: bridged", func() error { return s.waitSafe(switched) })
		s.step("merge: complete", func() error { return cluster.Complete(ctx, homeKeyspace, s.wf("merge", c)) })
		s.waitRows(30)
	})
	s.phase("move out", func() { s.move(s.wf("out", c), homeKeyspace, otherKeyspace) })
	s.phase("move home", func() {
		applyCustomerVSchema(t, ctx)
		s.move(s.wf("home", c), otherKeyspace, homeKeyspace)
	})
	s.stopW()
	s.check(time.Since(begin), len(s.w.rows)-rows0)
}

// wf names a workflow of cycle c, unique to the run (a name left by a
// failed run cannot get in the way; what Vitess refuses to repeat is a
// cutover's id, which names do not change: freshStreamIDs).
func (s *soak) wf(what string, c int) string { return fmt.Sprintf("%s%d%s", what, c, s.suffix) }

// move moves customer and corder from -> to, waiting before complete
// until the cutover is safe to complete (its away subscribers bridged).
func (s *soak) move(wf, from, to string) {
	ctx := s.ctx
	s.step(wf+": fresh stream ids", func() error { return freshStreamIDs(ctx, to) })
	s.step(wf+": copy", func() error { return cluster.MoveTables(ctx, to, wf, from, "customer,corder") })
	s.waitRows(30)
	switched := time.Now()
	s.step(wf+": switch", func() error { return cluster.SwitchTraffic(ctx, to, wf) })
	s.step(wf+": safe to complete", func() error { return s.waitSafe(switched) })
	s.step(wf+": complete", func() error { return cluster.Complete(ctx, to, wf) })
	s.waitRows(30)
}

// waitSafe waits until every cutover seen since `since` is safe to
// complete with no bridge in progress, and fails on a failed bridge.
func (s *soak) waitSafe(since time.Time) error {
	return eventuallyCtx(s.ctx, 3*time.Minute, "every cutover safe to complete", func() error {
		var rep movesReport
		g := s.live()
		if st, err := g.do(s.ctx, "GET", "/v1/reshards", nil, &rep); err != nil || st != 200 {
			return fmt.Errorf("GET /v1/reshards: %d %v", st, err)
		}
		found := false
		for _, m := range rep.Reshards {
			if m.SeenAt.Before(since) {
				continue
			}
			found = true
			for _, b := range m.Bridges {
				if b.State == "failed" {
					s.t.Errorf("SOAK %s: bridge %s/%s failed: %s", currentStep(), b.Stream, b.Subscriber, b.Error)
				}
				if b.State == "in_progress" {
					return fmt.Errorf("bridge %s/%s in progress", b.Stream, b.Subscriber)
				}
			}
			if !m.Safe {
				return fmt.Errorf("%s %s not safe to complete: blocking %+v", m.Type, m.Keyspace, m.Blocking)
			}
		}
		if !found {
			return fmt.Errorf("no cutover seen since %v", since.Format(time.TimeOnly))
		}
		return nil
	})
}

// live is a gateway that runs: one of the two is killed mid-cycle.
func (s *soak) live() *gateway {
	for _, g := range s.gws {
		if g.alive() {
			return g
		}
	}
	return s.gws[0]
}

// stored describes a named reader's stored cursor (for the log).
func (s *soak) stored(r *soakReader) string {
	if r.sub == "" {
		return "anonymous"
	}
	var list struct {
		Subscribers []struct {
			Subscriber string            `json:"subscriber"`
			Positions  map[string]string `json:"positions"`
			Bridges    int               `json:"bridges"`
		} `json:"subscribers"`
	}
	if st, err := s.live().do(s.ctx, "GET", "/v1/streams/"+r.stream+"/subscribers", nil, &list); err != nil || st != 200 {
		return fmt.Sprintf("GET subscribers: %d %v", st, err)
	}
	var v struct {
		Positions map[string]string
		Bridges   int
	}
	for _, x := range list.Subscribers {
		if x.Subscriber == r.sub {
			v.Positions, v.Bridges = x.Positions, x.Bridges
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	last := "none"
	if r.acked > 0 {
		last = r.evs[r.acked-1].str("email") + " on " + r.evs[r.acked-1].Shard
	}
	return fmt.Sprintf("stored positions %v, %d bridges; last acked row %s", v.Positions, v.Bridges, last)
}

// check runs at the end of a cycle, the writer stopped: every online
// reader reads up to end markers written once each has every row, and
// every reader's and webhook's rows are compared with what was written.
func (s *soak) check(took time.Duration, written int) {
	t, ctx := s.t, s.ctx
	soakStep.Store(fmt.Sprintf("cycle %d: check", s.cycleN))
	start := time.Now()
	want := s.w.settle(t, ctx)
	db := globalDB(t)
	var online []*soakReader
	for _, r := range s.readers {
		if r.online() {
			online = append(online, r)
		}
	}
	end := newReadEnd(len(online))
	end.write = globalMarkers(db)
	rctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, len(online))
	for i, r := range online {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = readTo(rctx, r.view(), s.missing(r, want), end, nil)
		}()
	}
	wg.Wait()
	for i, r := range online {
		if errs[i] != nil {
			t.Errorf("SOAK cycle %d: %s: %v", s.cycleN, r.name, errs[i])
		}
	}
	var lines []string
	s.missingN, s.repeatedN = 0, 0 // the checks are of everything since the start
	for _, r := range s.readers {
		got := s.rowsOf(r)
		w := s.wantOf(r, want)
		checkExactlyOnce(t, fmt.Sprintf("SOAK cycle %d: %s", s.cycleN, r.name), got, w)
		missing, repeated := tally(got, w)
		r.mu.Lock()
		resyncs, reconnects, moved := r.resyncs, r.reconnects, r.moved
		r.mu.Unlock()
		if len(resyncs) > 0 && !s.resyncAllowed(r) {
			t.Errorf("SOAK cycle %d: %s: unexpected resync at %v (a %s reader that was not away across a completed cutover)", s.cycleN, r.name, resyncs, map[bool]string{true: "named", false: "online"}[r.sub != ""])
		}
		s.missingN, s.repeatedN = s.missingN+missing, s.repeatedN+repeated
		state := "online"
		if !r.online() {
			state = "away"
		}
		lines = append(lines, fmt.Sprintf("%s (%s): %d rows, missing %d, repeated %d, reconnects %d, reshard/moved events %d, resyncs %v",
			r.name, state, len(got), missing, repeated, reconnects, moved, resyncs))
		if r.online() {
			if err := r.ackStored(rctx); err != nil {
				t.Errorf("SOAK cycle %d: %s: ack: %v", s.cycleN, r.name, err)
			}
		}
	}
	for _, h := range s.hooks {
		wantH := append(append([]string(nil), want...), endMarkers(end.id)...)
		h.r.waitRows(t, rctx, wantH)
		got := s.tagged(h.r.processed())
		checkExactlyOnce(t, fmt.Sprintf("SOAK cycle %d: %s", s.cycleN, h.name), got, want)
		missing, repeated := tally(got, want)
		s.missingN, s.repeatedN = s.missingN+missing, s.repeatedN+repeated
		h.r.checkSignatures(t)
		lines = append(lines, fmt.Sprintf("%s: %d rows, missing %d, repeated %d, %d requests", h.name, len(got), missing, repeated, len(h.r.messages())))
	}
	t.Logf("SOAK cycle %d: %d rows written (%d in all, %d inserts failed during switches) in %v; checked in %v\n  steps: %s\n  %s",
		s.cycleN, written, len(want), s.w.errs, took.Round(100*time.Millisecond), time.Since(start).Round(100*time.Millisecond),
		strings.Join(s.steps, ", "), strings.Join(lines, "\n  "))
}

// endMarkers lists the emails of the end markers of read end id.
func endMarkers(id string) []string {
	var out []string
	for i := range markerSlices {
		out = append(out, markerEmail(id, i, markerSlices))
	}
	return out
}

// wantOf is what reader r must have: every row since it began (after a
// resync too: its snapshot holds the whole table).
func (s *soak) wantOf(r *soakReader, want []string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return want[min(r.base, len(want)):]
}

// missing returns the rows of want reader r has not got yet.
func (s *soak) missing(r *soakReader, want []string) []string {
	have := map[string]bool{}
	for _, e := range s.rowsOf(r) {
		have[e.str("email")] = true
	}
	var out []string
	for _, e := range s.wantOf(r, want) {
		if !have[e] {
			out = append(out, e)
		}
	}
	return out
}

// rowsOf returns the reader's rows of the soak's writer: after its last
// resync (if any) the snapshot's and the changes that follow.
func (s *soak) rowsOf(r *soakReader) []ev {
	r.mu.Lock()
	evs := r.evs
	r.mu.Unlock()
	from := 0
	for i, e := range evs {
		if e.Type == "resync" {
			from = i + 1
		}
	}
	var out []ev
	for _, e := range evs[from:] {
		if e.Type == "change" {
			out = append(out, e)
		}
	}
	return s.tagged(out)
}

// tagged keeps the rows of the soak's writer (a resync's snapshot holds
// the whole table).
func (s *soak) tagged(evs []ev) []ev {
	var out []ev
	for _, e := range evs {
		if strings.HasPrefix(e.str("email"), s.w.tag+"-") {
			out = append(out, e)
		}
	}
	return out
}

func (s *soak) summary(cycles int, took time.Duration) {
	rows := len(s.w.settle(s.t, s.ctx))
	delivered, resyncs, unexpected := 0, 0, 0
	perReaders, perRows := map[string]int{}, map[string]int{}
	for _, r := range s.readers {
		n := len(s.rowsOf(r))
		delivered += n
		perReaders[r.transport]++
		perRows[r.transport] += n
		r.mu.Lock()
		resyncs += len(r.resyncs)
		if !s.resyncAllowed(r) {
			unexpected += len(r.resyncs)
		}
		r.mu.Unlock()
	}
	for _, h := range s.hooks {
		n := len(s.tagged(h.r.processed()))
		delivered += n
		perReaders["webhook"]++
		perRows["webhook"] += n
	}
	var per []string
	for _, tr := range []string{"pull", "sse", "ws", "webhook"} {
		per = append(per, fmt.Sprintf("%s=%d/%d", tr, perReaders[tr], perRows[tr]))
	}
	s.t.Logf("SOAK: cycles=%d rows=%d readers=%d webhooks=%d delivered=%d (readers/rows per transport: %s) missing=%d repeated=%d resyncs=%d (expected at most %d, unexpected %d) took=%v",
		cycles, rows, len(s.readers), len(s.hooks), delivered, strings.Join(per, " "), s.missingN, s.repeatedN, resyncs, s.expResync, unexpected, took.Round(time.Second))
}
