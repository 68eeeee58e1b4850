package source

import (
	"errors"
	"sync"
	"time"

	"github.com/vstream-gateway/vstream-gateway/metrics"
)

// outage is one reader's time without vtgate (DESIGN §11 rules 2, 5 and
// 6): from a transient failure of its VStream (or the start of the silence
// of a stalled one, or of the shard whose primary changed) until vtgate
// streams to it again. A vtgate restarting,
// down for a while, looking for a tablet, or cut off by a network that
// drops packets is an outage, not the end of the stream: the reader retries with backoff, resumes from its last whole
// transaction, and says so — a warning when the outage begins, another
// every stillUnavailableEvery while it lasts, and a line with its duration
// when it ends — and counts it (metrics/upstream.go).
type outage struct {
	since time.Time
	ended func() // metrics

	mu      sync.Mutex
	retries int
	lastErr error
	still   *time.Timer
}

// stillUnavailableEvery is how often a reader that is still without vtgate
// says so. Retries in between are logged at debug level only: with a
// backoff of a few seconds they would bury everything else.
var stillUnavailableEvery = 15 * time.Second

// lost records a transient failure; wait is the backoff before the retry.
func (r *Reader) lost(err error, wait time.Duration) {
	log := r.c.log.With("stream", r.spec.Name, "keyspace", r.spec.Keyspace)
	var stall *StallError
	if errors.As(err, &stall) {
		metrics.UpstreamStalled(r.spec.Name)
	}
	if o := r.down; o != nil {
		o.mu.Lock()
		o.retries++
		o.lastErr = err
		o.mu.Unlock()
		log.Debug("upstream still failing; retrying", "err", err, "retry_in", wait, "unavailable_for", time.Since(o.since).Round(time.Millisecond))
		return
	}
	// An outage began with the silence, not when it was noticed (a stall
	// after the stall timeout, a dead connection after TCP or keepalive
	// gave up): it counts from the start of the failed wait for vtgate —
	// its last answer, at most a heartbeat interval before trouble.
	since := r.waitFrom
	var rep *ReparentError
	if errors.As(err, &rep) {
		// The shard went silent before the watch noticed its new
		// primary: from its last event, or the start of the attempt.
		since = rep.Since
	} else if shard := failedShard(err, r.spec.Keyspace); shard != "" {
		// vtgate gave up on one shard's tablet while the others kept
		// the stream busy (rule 3): that shard was silent for longer
		// than the last wait.
		if s := r.track.silentSince(shard); s.Before(since) {
			since = s
		}
	}
	if since.IsZero() {
		since = time.Now()
	}
	o := &outage{since: since, lastErr: err}
	o.ended = metrics.UpstreamLost(r.spec.Name, o.since)
	var remind func()
	remind = func() {
		o.mu.Lock()
		defer o.mu.Unlock()
		if o.still == nil {
			return // ended meanwhile
		}
		log.Warn("upstream still unavailable; retrying", "unavailable_for", time.Since(o.since).Round(time.Second),
			"retries", o.retries, "err", o.lastErr)
		o.still = time.AfterFunc(stillUnavailableEvery, remind)
	}
	o.still = time.AfterFunc(stillUnavailableEvery, remind)
	r.down = o
	if stall != nil {
		log.Warn("upstream stalled: vtgate sent nothing, not even a heartbeat; reopening from the last transaction",
			"silent_for", time.Since(since).Round(time.Millisecond), "stall_timeout", stall.Timeout, "retry_in", wait)
		return
	}
	if rep != nil {
		log.Warn("upstream shard primary changed; reopening from the last transaction", "shard", rep.Shard,
			"old_primary", rep.Old.Alias, "new_primary", rep.New.Alias, "silent_for", time.Since(since).Round(time.Millisecond))
		return
	}
	log.Warn("upstream unavailable; retrying from the last transaction", "err", err, "retry_in", wait)
}

// endOutage ends the current outage, if any: the VStream streams again
// ("resumed"), failed for good ("failed"), or the reader was closed.
func (r *Reader) endOutage(how string) {
	o := r.down
	if o == nil {
		return
	}
	r.down = nil
	o.mu.Lock()
	o.still.Stop()
	o.still = nil
	retries, lastErr := o.retries, o.lastErr
	o.mu.Unlock()
	o.ended()
	d := time.Since(o.since).Round(time.Millisecond)
	log := r.c.log.With("stream", r.spec.Name, "keyspace", r.spec.Keyspace, "unavailable_for", d, "retries", retries)
	switch how {
	case "resumed":
		log.Info("upstream available again; stream resumed", "last_err", lastErr)
	default:
		log.Info("reader ended while the upstream was unavailable", "how", how, "last_err", lastErr)
	}
}
