package main

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// env is what every reader of a run shares.
type env struct {
	target string // "gateway" or "centrifugo"
	addr   string // host:port of the server
	stream string // gateway stream, or Centrifugo channel
	token  string // bearer token (gateway) or connection JWT (Centrifugo)
	marker []byte
	lat    *hist
	// firstLat is the latency of the first receipt of each row by any
	// reader (first marks the rows received): what the path up to the
	// server's first write costs, without the fan-out's share.
	firstLat *hist
	first    []atomic.Bool
	// arrLat is the latency at the kernel's receive time of the rows of
	// WebSocket readers (where the kernel stamps them): the readers' share
	// of the CPU, the time until the tool reads a socket, left out.
	arrLat   *hist
	pullWait time.Duration
	// pullBase is the base URL pull readers ask (the gateway, or a cache
	// in front of it); pullStart, if set, the cursor every pull reader
	// starts from (--pull-in-step).
	pullBase  string
	pullStart string
	// pullRequests counts the requests pull readers made.
	pullRequests atomic.Int64
	batchTxn     bool // WebSocket batch=txn
	log          *slog.Logger
	ready        chan int // a reader's id, once, when it first knows its position
	sse          *sseClient
	pull         *pullClient
}

// reader is one simulated client. Its counters are atomic because the run
// watches them while draining; its tally is its own until the run ends.
type reader struct {
	id   int
	kind string // ws, sse, pull, cf (Centrifugo WebSocket)
	env  *env
	t    *tally
	uniq atomic.Int64 // distinct rows received
	msgs atomic.Int64 // messages (events, SSE events, publications) received

	// Resume position: the gateway's cursor, or Centrifugo's stream
	// position (offset within epoch).
	cursor   []byte
	cfOffset uint64
	// scope and interval are what the last pull page said to pass back
	// (Vsg-Scope, Vsg-Interval): the URL a cache keeps pages under.
	scope, interval string
	cfEpoch         string

	readyOnce sync.Once
	readyAt   atomic.Int64 // t.readyAt, for the run to read while the reader runs
	// release frees the reader's slot among those connecting at the start
	// (once connected, once its first connection failed, or after a few
	// seconds), so that thousands of handshakes are not all in flight at
	// once.
	release func()
	kickMu  sync.Mutex
	kicked  bool
	stop    func() // ends the current connection

	// arrived is the kernel's receive time of what the reader's handler
	// holds (Unix ns; 0 when unknown), set by the connection's reading.
	arrived int64

	planned, unplanned, connectErrs, recoveryFailed, malformed atomic.Int64
	lastErr                                                    atomic.Pointer[string]
}

// row records one row of the run.
func (r *reader) row(seq, ts, now int64) {
	if !r.t.add(seq, now) {
		r.uniq.Add(1)
	}
	r.env.lat.record(time.Duration(now - ts))
	if r.arrived > 0 && r.env.arrLat != nil {
		r.env.arrLat.record(time.Duration(r.arrived - ts))
	}
	if f := r.env.first; seq >= 0 && seq < int64(len(f)) && !f[seq].Load() && !f[seq].Swap(true) {
		r.env.firstLat.record(time.Duration(now - ts))
	}
}

// markReady records that the reader knows its position.
func (r *reader) markReady(now int64) {
	r.readyOnce.Do(func() {
		r.t.readyAt = now
		r.readyAt.Store(now)
		r.env.ready <- r.id
		if r.release != nil {
			r.release()
		}
	})
}

func (r *reader) readyAtSafe() int64 { return r.readyAt.Load() }

// setStop installs how to end the current connection. A kick that came
// while connecting takes effect at once.
func (r *reader) setStop(f func()) {
	if r.release != nil {
		r.release() // connected: the next reader may start its handshake
	}
	r.kickMu.Lock()
	r.stop = f
	k := r.kicked
	r.kickMu.Unlock()
	if k && f != nil {
		f()
	}
}

// kick makes the reader close its connection and resume from its position:
// one client of a reconnect storm.
func (r *reader) kick() {
	r.kickMu.Lock()
	r.kicked = true
	f := r.stop
	r.kickMu.Unlock()
	if f != nil {
		f()
	}
}

func (r *reader) takeKick() bool {
	r.kickMu.Lock()
	defer r.kickMu.Unlock()
	k := r.kicked
	r.kicked = false
	r.stop = nil
	return k
}

// session connects once and reads until the connection ends. connected is
// set once the server accepted the connection.
type session func(ctx context.Context, r *reader, connected *bool) error

// run keeps the reader connected until ctx ends: a kicked connection comes
// back at once from its position; one the server or the network ended
// comes back after a backoff (100 ms doubling to 2 s, with jitter, so that
// thousands of refused clients do not retry in step).
func (r *reader) run(ctx context.Context, s session) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		connected := false
		err := s(ctx, r, &connected)
		if r.release != nil {
			r.release()
		}
		if ctx.Err() != nil {
			return
		}
		if r.takeKick() {
			r.planned.Add(1)
			continue
		}
		msg := "connection ended"
		if err != nil {
			msg = err.Error()
		}
		r.lastErr.Store(&msg)
		if connected {
			r.unplanned.Add(1)
			backoff = 100 * time.Millisecond
		} else {
			r.connectErrs.Add(1)
		}
		r.env.log.Debug("reader disconnected", "reader", r.id, "kind", r.kind, "err", err)
		d := backoff/2 + rand.N(backoff/2+1)
		backoff = min(2*backoff, 2*time.Second)
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}
