package handlers

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vstream-gateway/vstream-gateway/auth"
	"github.com/vstream-gateway/vstream-gateway/internal/wait"
)

func testPage(s string, keep bool) *page {
	b := []byte(s)
	return &page{buf: &b, keep: keep}
}

// The first caller going away does not fail the others: the page is made
// on its own context, which ends only when every caller has gone.
func TestFlightsOutliveTheFirstCaller(t *testing.T) {
	var f flights
	release := make(chan struct{})
	var made atomic.Int32
	fn := func(ctx context.Context) (*page, error) {
		made.Add(1)
		select {
		case <-release:
			return testPage("p", false), nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	first, leave := context.WithCancel(context.Background())
	firstDone := make(chan error)
	go func() {
		_, _, err := f.do(first, "k", 0, fn)
		firstDone <- err
	}()
	// The second caller joins the first's flight.
	second := make(chan *page)
	joined := func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.m["k"] != nil && f.m["k"].waiting == 1
	}
	wait.For(t, "the first caller's flight", 10*time.Second, joined)
	go func() {
		pg, shared, err := f.do(context.Background(), "k", 0, fn)
		if err != nil || !shared {
			t.Errorf("second caller: shared %v, %v", shared, err)
		}
		second <- pg
	}()
	wait.For(t, "the second caller joining", 10*time.Second, func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.m["k"].waiting == 2
	})
	leave()
	if err := <-firstDone; !errors.Is(err, context.Canceled) {
		t.Errorf("first caller: %v", err)
	}
	close(release)
	if pg := <-second; pg == nil || string(*pg.buf) != "p" {
		t.Errorf("second caller's page: %+v", pg)
	}
	if made.Load() != 1 {
		t.Errorf("page made %d times", made.Load())
	}
}

// When every caller has gone the flight is cancelled, and a later caller
// starts a flight of its own rather than joining a cancelled one.
func TestFlightsCancelledWithoutCallers(t *testing.T) {
	var f flights
	cancelled := make(chan struct{})
	fn := func(ctx context.Context) (*page, error) {
		<-ctx.Done()
		close(cancelled)
		return nil, ctx.Err()
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := f.do(ctx, "k", 0, fn); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled caller: %v", err)
	}
	<-cancelled
	pg, shared, err := f.do(context.Background(), "k", 0, func(context.Context) (*page, error) { return testPage("new", false), nil })
	if err != nil || shared || string(*pg.buf) != "new" {
		t.Errorf("later caller: %v %v %v", pg, shared, err)
	}
}

// A finished page worth keeping answers the callers just behind for keep;
// one that is not (the cursor did not move), nobody after its flight.
func TestFlightsKeepPages(t *testing.T) {
	var f flights
	make := func(s string, keep bool) func(context.Context) (*page, error) {
		return func(context.Context) (*page, error) { return testPage(s, keep), nil }
	}
	f.do(context.Background(), "moved", time.Hour, make("a", true))
	pg, shared, _ := f.do(context.Background(), "moved", time.Hour, make("b", true))
	if !shared || string(*pg.buf) != "a" {
		t.Errorf("kept page: %s shared %v", *pg.buf, shared)
	}
	f.do(context.Background(), "still", time.Hour, make("a", false))
	pg, shared, _ = f.do(context.Background(), "still", time.Hour, make("b", false))
	if shared || string(*pg.buf) != "b" {
		t.Errorf("a page that did not move the cursor was kept: %s", *pg.buf)
	}
	f.do(context.Background(), "off", 0, make("a", true))
	if pg, _, _ = f.do(context.Background(), "off", 0, make("b", true)); string(*pg.buf) != "b" {
		t.Errorf("kept with keep 0")
	}
}

// The scope hash is of the claim's canonical form: order and duplicates
// do not matter, another claim or stream gives another hash, and every
// claim that lets all tables through hashes as authentication off does.
func TestScopeHash(t *testing.T) {
	tok := func(tables ...string) *auth.Principal { return &auth.Principal{Tables: tables} }
	a := scopeHash("s", tok("ks.a", "ks.b"))
	if b := scopeHash("s", tok("ks.b", "ks.a", "ks.b")); a != b {
		t.Errorf("order changed the hash: %s %s", a, b)
	}
	for _, other := range []string{scopeHash("s", tok("ks.a")), scopeHash("t", tok("ks.a", "ks.b")), scopeHash("s", tok())} {
		if other == a {
			t.Errorf("another scope, same hash %s", a)
		}
	}
	all := scopeHash("s", nil)
	if scopeHash("s", tok("*")) != all || scopeHash("s", auth.Anonymous("h")) != all || scopeHash("s", tok("ks.a", "*")) != all {
		t.Errorf("claims allowing everything hash differently")
	}
	if len(a) != 16 {
		t.Errorf("hash %q", a)
	}
}

// An answer that did not move the cursor moves the interval past the
// request's; one that did hands out the current unit.
func TestNextInterval(t *testing.T) {
	now := time.Unix(2000, 0) // unit 100
	for _, c := range []struct {
		asked      int64
		progressed bool
		want       int64
	}{{-1, false, 100}, {-1, true, 100}, {100, false, 101}, {105, false, 106}, {105, true, 100}, {90, false, 100}} {
		if got := nextInterval(c.asked, c.progressed, now); got != c.want {
			t.Errorf("nextInterval(%d, %v) = %d, want %d", c.asked, c.progressed, got, c.want)
		}
	}
}

// A panic making a page is every waiting caller's error, not the end of
// the process.
func TestFlightsRecoverPanics(t *testing.T) {
	var f flights
	_, _, err := f.do(context.Background(), "k", 0, func(context.Context) (*page, error) { panic("boom") })
	if !errors.Is(err, errPagePanic) {
		t.Errorf("panic: %v", err)
	}
}

// Which pages a shared cache may keep, and for how long. Above all, an
// answer that did not move the cursor and is not at the live end is never
// kept: its reader asks again at once, at the same URL, and a kept answer
// would hold it at that cursor for as long as the cache keeps a page.
func TestCacheControl(t *testing.T) {
	a := &API{PullConfig: PullConfig{Cache: true, CacheMaxAge: time.Hour, LiveMaxAge: 5 * time.Second}}
	for _, c := range []struct {
		name     string
		req      pullRequest
		pg       page
		wantCC   string
		wantKind string
	}{
		{"a page from a cursor", pullRequest{cursor: "c", shareable: true, interval: -1}, page{progressed: true},
			"public, max-age=3600, stale-while-revalidate=3600", "whole"},
		{"a snapshot's first page", pullRequest{shareable: true, interval: -1}, page{progressed: true},
			"public, max-age=60, stale-while-revalidate=60", "start"},
		{"a copy that sent nothing within the wait", pullRequest{cursor: "c", shareable: true, interval: -1, wait: time.Second}, page{},
			"no-store", ""},
		{"the same, without wait", pullRequest{cursor: "c", shareable: true, interval: -1, collapsed: true}, page{},
			"no-store", ""},
		{"the same, with an interval", pullRequest{cursor: "c", shareable: true, interval: 7, wait: time.Second, collapsed: true}, page{},
			"no-store", ""},
		{"the live end, collapsed, moved", pullRequest{cursor: "c", shareable: true, interval: -1, wait: time.Second, collapsed: true}, page{upToDate: true, progressed: true},
			"public, max-age=5, stale-while-revalidate=5", "live"},
		{"the live end, not moved, no interval", pullRequest{cursor: "c", shareable: true, interval: -1, wait: time.Second, collapsed: true}, page{upToDate: true},
			"no-store", ""},
		{"the live end, not moved, with an interval", pullRequest{cursor: "c", shareable: true, interval: 7, wait: time.Second, collapsed: true}, page{upToDate: true},
			"public, max-age=5, stale-while-revalidate=5", "live"},
		{"the live end, not collapsed", pullRequest{cursor: "c", shareable: true, interval: -1}, page{upToDate: true, progressed: true},
			"no-store", ""},
		{"a named subscriber", pullRequest{cursor: "c", sub: "s", shareable: true, interval: -1}, page{progressed: true},
			"private, no-store", ""},
		{"a URL without the token's scope", pullRequest{cursor: "c", interval: -1}, page{progressed: true},
			"no-store", ""},
	} {
		cc, kind := a.cacheControl(&c.req, &c.pg)
		if cc != c.wantCC || kind != c.wantKind {
			t.Errorf("%s: %q %q, want %q %q", c.name, cc, kind, c.wantCC, c.wantKind)
		}
	}
}
