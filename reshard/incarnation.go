package reshard

import (
	"context"
	"slices"
	"time"

	"github.com/vstream-gateway/vstream-gateway/position"
	"github.com/vstream-gateway/vstream-gateway/source"
)

// Incarnations of shard names (DESIGN §4 rule 6, position/incarnation.go).
//
// A shard name's incarnation is the key of the latest recorded reshard
// journal that had the name among its participants — the journal that
// retired the shard before it — or "" when none did. The name's first
// shard (and every shard of a keyspace never resharded back to a name it
// used) has "", so positions minted before incarnations existed keep
// their meaning. The definition needs only the journals that retired a
// name, never the one that created it again: a reader of the new "0"
// stamps its positions correctly even before anyone recorded the merge
// that created it, and two replicas agree without talking.
//
// MoveTables journals retire no shard (their sources keep serving), so
// they count for nothing here; their participants are stamped with the
// incarnation they had when the tables moved.

// lastRetired returns the index of the latest reshard journal of list
// (oldest first) before index end that retired shard, or -1.
func lastRetired(list []*Journal, shard string, end int) int {
	for i := min(end, len(list)) - 1; i >= 0; i-- {
		if j := list[i]; !j.Moves() && slices.Contains(j.Participants, shard) {
			return i
		}
	}
	return -1
}

// retiredBefore returns the key of the latest reshard journal of list
// before index end that retired shard: the incarnation of the shard
// serving under the name there, or "".
func retiredBefore(list []*Journal, shard string, end int) string {
	if i := lastRetired(list, shard, end); i >= 0 {
		return list[i].Key
	}
	return ""
}

// annotate gives every journal of list (one keyspace's, oldest first) the
// incarnations of its participants and, for reshards, of its targets:
// what LocalPosition and Apply stamp their entries with. A MoveTables
// journal's targets are in another keyspace; targets maps that keyspace's
// journals (nil: not loaded, the targets stay unstamped).
func annotate(list []*Journal, targets map[string][]*Journal) {
	for i, j := range list {
		j.from = map[string]string{}
		for _, p := range j.Participants {
			j.from[p] = retiredBefore(list, p, i)
		}
		j.to = map[string]string{}
		other, at := list, i
		if j.Moves() {
			other = targets[j.Target()]
			at = countBefore(other, j.SeenAt)
		}
		for _, t := range j.Targets {
			j.to[t.Shard] = retiredBefore(other, t.Shard, at)
		}
	}
}

// countBefore is how many journals of list were seen before t.
func countBefore(list []*Journal, t time.Time) int {
	n := 0
	for _, j := range list {
		if j.SeenAt.Before(t) {
			n++
		}
	}
	return n
}

// Live returns the incarnation of the shard the topology shows under the
// name (serving, or readable: a primary running, not serving), whose
// primary began its term at since (zero: unknown).
//
// A name no journal retired is "". A name retired by journal r is, if its
// primary has served since before r was seen, the retired shard itself —
// between SwitchTraffic and the serving graph's update, between the
// switch and `complete`, or back in service after ReverseTraffic — and
// has the incarnation it had before r. Otherwise it is a shard created
// under the name after r (a merge back, or a reshard to it still
// copying): r's key. An unknown term counts as new: a cursor of the old
// shard is then rebuilt through r (exact when past r, a resync when
// not), never handed to a shard with another history.
func Live(list []*Journal, shard string, state source.ShardState, since time.Time) string {
	last := lastRetired(list, shard, len(list))
	if last < 0 {
		return ""
	}
	if r := list[last]; state == source.ShardGone || since.IsZero() || !since.Before(r.SeenAt) {
		return r.Key
	}
	return retiredBefore(list, shard, last)
}

// liveState is a cursor entry's state against the topology: the name's
// state when the entry is of the incarnation the topology shows, gone
// when it is of another (an older shard under the same name).
func liveState(s position.Shard, topo source.Topology, journals map[string][]*Journal) source.ShardState {
	st := topo.State(s.Keyspace, s.Shard)
	if st == source.ShardGone || s.Shard == "" || !topo.Keyspaces[s.Keyspace] {
		return st
	}
	if s.Incarnation != Live(journals[s.Keyspace], s.Shard, st, topo.TermStart(s.Keyspace, s.Shard)) {
		return source.ShardGone
	}
	return st
}

// Incarnations returns a function giving the incarnation of each shard
// of keyspace as the topology shows it now: what a reader stamps a shard
// with when no position told it (source.WithIncarnations).
//
// While the store does not answer, the list last read serves: journals
// never change once recorded, and none can be recorded meanwhile, so it
// lacks only what another replica recorded since — and without it every
// stream opening now would fail until the store is back.
func (r *Registry) Incarnations(ctx context.Context, topo source.Topology, keyspace string) (func(shard string) string, error) {
	list, err := r.List(ctx, keyspace)
	r.mu.Lock()
	if err == nil {
		r.last[keyspace] = list
	} else if last, ok := r.last[keyspace]; ok {
		list, err = last, nil
	}
	r.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return func(shard string) string {
		st := topo.State(keyspace, shard)
		if st == source.ShardGone {
			st = source.ShardServing // vtgate streams it: it is there
		}
		return Live(list, shard, st, topo.TermStart(keyspace, shard))
	}, nil
}

// CreatedAfter reports whether the shard named shard in incarnation inc
// was created by a reshard journal of list (one keyspace's, oldest first)
// recorded after the journal key: a position on it is past key's cutover
// (a split after a MoveTables move out of the shard it split). False when
// key is not in list or no later journal created that shard.
func CreatedAfter(list []*Journal, key, shard, inc string) bool {
	k := slices.IndexFunc(list, func(j *Journal) bool { return j.Key == key })
	if k < 0 {
		return false
	}
	for _, j := range list[k+1:] {
		if j.Moves() {
			continue
		}
		if to, ok := j.to[shard]; ok && to == inc {
			return true
		}
	}
	return false
}

// Older reports whether incarnation a of a shard name came before
// incarnation b in list (one keyspace's journals, oldest first): ""
// before every journal's, a journal's before a later one's. Unknown keys
// are not ordered (false).
func Older(list []*Journal, a, b string) bool {
	at := func(key string) int {
		if key == "" {
			return -1
		}
		for i, j := range list {
			if j.Key == key {
				return i
			}
		}
		return -2
	}
	ia, ib := at(a), at(b)
	return ia != -2 && ib != -2 && ia < ib
}
