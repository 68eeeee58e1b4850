package source

import (
	"context"
	"regexp"
	"sync"
	"time"

	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"
)

// shardTrack is what the primary watch (primaries.go) needs of a reader:
// which shards its current attempt streams, when it last heard from each,
// and how to cancel the attempt's wait for vtgate. It is shared between
// the reader's goroutine and the watch, hence the lock; the reader takes
// it once per Recv.
type shardTrack struct {
	mu     sync.Mutex
	cancel context.CancelCauseFunc // the current attempt's stream; nil between attempts
	from   time.Time               // when the current attempt began
	all    bool                    // its position names the keyspace without a shard: every shard
	named  map[string]bool         // shards its position names
	last   map[string]shardSeen    // by shard, the last event received from it
}

type shardSeen struct {
	at       time.Time // when it was received
	commitTS int64     // the latest commit timestamp from the shard (Unix seconds; its primary's clock)
}

// begin records a new attempt from pos, whose stream cancel cancels.
func (t *shardTrack) begin(keyspace string, pos *binlogdatapb.VGtid, cancel context.CancelCauseFunc) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.cancel, t.from, t.all = cancel, time.Now(), false
	t.named = map[string]bool{}
	for _, sg := range pos.GetShardGtids() {
		if sg.GetKeyspace() != keyspace {
			continue
		}
		if sg.GetShard() == "" {
			t.all = true
		}
		t.named[sg.GetShard()] = true
	}
	if t.last == nil {
		t.last = map[string]shardSeen{}
	}
}

// end records that the attempt's stream is over: nothing to cancel.
func (t *shardTrack) end() {
	t.mu.Lock()
	t.cancel = nil
	t.mu.Unlock()
}

// saw records the events of one Recv. vtgate tags every event it passes on
// with its shard (heartbeats, which are vtgate's own, carry none).
func (t *shardTrack) saw(evs []*binlogdatapb.VEvent) {
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	prev := ""
	for _, ev := range evs {
		sh := ev.GetShard()
		if sh == "" || (sh == prev && ev.GetTimestamp() == 0) {
			continue
		}
		prev = sh
		s := t.last[sh]
		s.at = now
		s.commitTS = max(s.commitTS, ev.GetTimestamp())
		t.last[sh] = s
	}
}

// reparented is the primary watch telling the reader that keyspace/shard
// has a new primary p. If the reader's current attempt streams that shard
// and has received nothing the new primary committed, the attempt's wait
// for vtgate is cancelled with a *ReparentError: only the wait, never a
// transaction being handed to the consumer (which runs under the reader's
// own context), so the attempt returns the position of its last whole
// transaction and the reader reopens from there. It returns how long the
// shard had been silent and whether the stream is reopened.
func (r *Reader) reparented(keyspace, shard string, old, p Primary) (time.Duration, bool) {
	t := &r.track
	t.mu.Lock()
	defer t.mu.Unlock()
	if keyspace != r.spec.Keyspace || t.cancel == nil {
		// Between attempts: the next one asks vtgate afresh, and vtgate
		// picks the shard's primary from the topology.
		return 0, false
	}
	seen, heard := t.last[shard]
	if !t.all && !t.named[shard] && !heard {
		return 0, false // not a shard of this stream
	}
	// A transaction committed after the new term began can only come
	// from the new primary: vtgate moved the stream already (a planned
	// reparent, or vtgate gave up on the old tablet first).
	if heard && !p.TermStart.IsZero() && seen.commitTS > p.TermStart.Unix() {
		return 0, false
	}
	since := t.from
	if seen.at.After(since) {
		since = seen.at
	}
	t.cancel(&ReparentError{Keyspace: keyspace, Shard: shard, Old: old, New: p, Since: since})
	t.cancel = nil
	return time.Since(since), true
}

// silentSince is when the current attempt last heard from shard: its last
// event, or the start of the attempt if later.
func (t *shardTrack) silentSince(shard string) time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	since := t.from
	if s, ok := t.last[shard]; ok && s.at.After(since) {
		since = s.at
	}
	return since
}

// failedShard is the shard of keyspace that a VStream error of vtgate
// names, if any: "persistent error in vstream for ks/shard on tablet …" or
// "error starting stream from shard GTID keyspace:"ks" shard:"shard" …",
// the errors vtgate returns when it gives up on a shard's tablet (after an
// emergency reparent, the dead primary's).
func failedShard(err error, keyspace string) string {
	for _, re := range failedShardErrors {
		for _, m := range re.FindAllStringSubmatch(err.Error(), -1) {
			if m[1] == keyspace {
				return m[2]
			}
		}
	}
	return ""
}

var failedShardErrors = []*regexp.Regexp{
	regexp.MustCompile(`vstream for ([^/\s]+)/(\S+) on tablet`),
	regexp.MustCompile(`shard GTID keyspace:\\?"([^"\\]+)\\?"\s+shard:\\?"([^"\\]+)\\?"`),
}
