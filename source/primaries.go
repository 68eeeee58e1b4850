package source

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/vstream-gateway/vstream-gateway/metrics"
)

// ErrReparented is a VStream cancelled because the primary of one of its
// shards changed (DESIGN §11 rule 6): vtgate may still be reading that
// shard from the old primary's vttablet — after an emergency reparent it
// does so until it gives up, up to about 30 s — so the reader reopens the
// stream from its last whole transaction and vtgate picks the new primary.
var ErrReparented = errors.New("source: shard primary changed")

// ReparentError is ErrReparented with the shard and what was measured.
type ReparentError struct {
	Keyspace, Shard string
	Old, New        Primary
	// Since is when the reader last received anything from the shard (or
	// opened the stream, if later): the shard's silence, and the outage
	// it is counted as, began then.
	Since time.Time
}

func (e *ReparentError) Error() string {
	return fmt.Sprintf("%v: %s/%s %s → %s (shard silent for %v)", ErrReparented, e.Keyspace, e.Shard,
		e.Old.Alias, e.New.Alias, time.Since(e.Since).Round(time.Millisecond))
}

func (e *ReparentError) Unwrap() error { return ErrReparented }

// Primary is the primary tablet of a shard as vtgate's health check sees
// it. A reparent changes the alias; a tablet that is demoted and promoted
// again keeps it but starts a new term.
type Primary struct {
	Alias string
	// TermStart is when it became primary (vtgate's PrimaryTermStartTime,
	// whole seconds; zero when unknown).
	TermStart time.Time
}

// DefaultPrimaryPoll is how often the gateway asks vtgate for the primaries
// of the shards it streams: one query per gateway process, whatever the
// number of keyspaces and readers.
const DefaultPrimaryPoll = 2 * time.Second

// WithPrimaryPoll watches the primaries of the shards the client's readers
// stream, asking vtgate every d (SHOW VITESS_TABLETS); 0 (the default)
// turns the watch off. A shard whose primary changed has its VStreams
// reopened from their last whole transaction (DESIGN §11 rule 6).
func WithPrimaryPoll(d time.Duration) Option { return func(o *options) { o.primaryPoll = d } }

// readerSet is the registry of a client's open readers by keyspace, which
// the primary watch notifies.
type readerSet struct {
	mu   sync.Mutex
	byKs map[string]map[*Reader]struct{}
}

func (s *readerSet) add(r *Reader) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byKs == nil {
		s.byKs = map[string]map[*Reader]struct{}{}
	}
	if s.byKs[r.spec.Keyspace] == nil {
		s.byKs[r.spec.Keyspace] = map[*Reader]struct{}{}
	}
	s.byKs[r.spec.Keyspace][r] = struct{}{}
}

func (s *readerSet) remove(r *Reader) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.byKs[r.spec.Keyspace], r)
	if len(s.byKs[r.spec.Keyspace]) == 0 {
		delete(s.byKs, r.spec.Keyspace)
	}
}

func (s *readerSet) of(keyspace string) []*Reader {
	s.mu.Lock()
	defer s.mu.Unlock()
	rs := make([]*Reader, 0, len(s.byKs[keyspace]))
	for r := range s.byKs[keyspace] {
		rs = append(rs, r)
	}
	return rs
}

// Primaries asks vtgate for the primary of every shard of keyspaces (nil:
// of every keyspace), by "keyspace/shard". During a reparent vtgate's health check can list two
// tablets as PRIMARY (the old one still reporting itself so): the one with
// the later term start is the primary, as vtgate itself decides.
func (c *Client) Primaries(ctx context.Context, keyspaces map[string]bool) (map[string]Primary, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	res, err := c.conn.Session("", nil).Execute(ctx, "show vitess_tablets", nil, false)
	if err != nil {
		return nil, fmt.Errorf("source: show vitess_tablets: %w", err)
	}
	out := map[string]Primary{}
	for _, row := range res.Rows {
		// Cell, Keyspace, Shard, TabletType, State, Alias, Hostname, PrimaryTermStartTime
		if len(row) < 8 {
			continue
		}
		ks, shard, typ := row[1].ToString(), row[2].ToString(), row[3].ToString()
		if keyspaces != nil && !keyspaces[ks] || !strings.EqualFold(typ, "PRIMARY") {
			continue
		}
		p := Primary{Alias: row[5].ToString()}
		if ts := row[7].ToString(); ts != "" {
			if t, err := time.Parse(time.RFC3339, ts); err == nil {
				p.TermStart = t
			}
		}
		key := ks + "/" + shard
		if old, ok := out[key]; !ok || p.TermStart.After(old.TermStart) {
			out[key] = p
		}
	}
	return out, nil
}

// watchPrimaries polls vtgate for the primaries of every shard until ctx
// ends, from the start: a shard's first answer is its baseline, a later
// one naming another tablet or term a reparent. Polling only while a
// keyspace has readers would leave a reparent unseen when it falls in the
// first interval after the keyspace's first reader opened (the baseline
// would name the new primary already); one query every interval per
// process is cheap.
//
// vtgate's health check is the view to watch: it is what vtgate routes by,
// the gateway already has the connection, and it learns of a promotion
// from the new primary's health stream within a second (both tablets are
// listed as PRIMARY for a moment, the new one with the later term).
// vtctld (GetShard) would need a flag the gateway does not require and a
// second connection.
func (c *Client) watchPrimaries(ctx context.Context, every time.Duration) {
	w := primaryWatch{known: map[string]Primary{}, absent: map[string]int{}}
	t := time.NewTimer(0)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		t.Reset(every)
		now, err := c.Primaries(ctx, nil)
		if err != nil {
			// vtgate down or restarting: the readers notice that
			// themselves (rule 2); the watch tries again next time.
			if !failing && ctx.Err() == nil {
				c.log.Debug("primary watch: vtgate did not answer", "err", err)
			}
			failing = true
			continue
		}
		failing = false
		for _, ch := range w.update(now) {
			ks, shard, _ := strings.Cut(ch.key, "/")
			c.reparented(ks, shard, ch.old, ch.new)
		}
	}
}

// forgetAfter is how many answers in a row must lack a shard before the
// watch forgets it. One is not enough: during a planned reparent the old
// primary is demoted before the new one is promoted, and an answer in
// between lists no primary for the shard; forgotten then, the promotion
// would be taken for a new shard and its readers left on the old tablet.
const forgetAfter = 3

// primaryWatch is the watch's memory: the primary of every shard vtgate
// listed, and for how many answers in a row a known shard was missing.
type primaryWatch struct {
	known  map[string]Primary
	absent map[string]int
}

type primaryChange struct {
	key      string
	old, new Primary
}

// update takes one answer of vtgate and returns the shards whose primary
// changed. A shard that has been missing from forgetAfter answers is
// forgotten: a reshard deleted it, and a shard of the same name created
// later (a merge back to 0 reuses the name, and vtlocal or an operator may
// reuse the tablet alias, with a new term) is a new shard whose first
// answer is its baseline, not a reparent of the old one (DESIGN §11 rule 6).
// Taken for a reparent, it reopened every VStream of the keyspace in the
// middle of the merge's cutover.
func (w *primaryWatch) update(now map[string]Primary) []primaryChange {
	var changed []primaryChange
	for key, p := range now {
		delete(w.absent, key)
		old, ok := w.known[key]
		w.known[key] = p
		if ok && old != p {
			changed = append(changed, primaryChange{key: key, old: old, new: p})
		}
	}
	for key := range w.known {
		if _, ok := now[key]; ok {
			continue
		}
		if w.absent[key]++; w.absent[key] >= forgetAfter {
			delete(w.known, key)
			delete(w.absent, key)
		}
	}
	return changed
}

// reparented tells every reader of keyspace that reads shard that its
// primary changed, logs the change once and counts it.
func (c *Client) reparented(keyspace, shard string, old, p Primary) {
	var silent time.Duration
	reopened := 0
	for _, r := range c.readers.of(keyspace) {
		d, reopen := r.reparented(keyspace, shard, old, p)
		if reopen {
			reopened++
			silent = max(silent, d)
		}
	}
	metrics.UpstreamReparent(keyspace, shard)
	c.log.Warn("shard primary changed; reopening its VStreams from their last transaction",
		"keyspace", keyspace, "shard", shard, "old_primary", old.Alias, "new_primary", p.Alias,
		"term_start", p.TermStart, "silent_for", silent.Round(time.Millisecond), "reopened", reopened)
}
