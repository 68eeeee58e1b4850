package streams

import (
	"context"
	"fmt"
	"time"
)

// BlockPartialMove is the reason of a Block: a MoveTables cutover moved
// some of the stream's tables (or a table a /regex/ rule may match) and
// not the others. One stream reads one keyspace at a time (DESIGN §4.1),
// so it cannot follow: it keeps reading its keyspace, where the moved
// tables get no new rows once the traffic is switched.
const BlockPartialMove = "partial_move"

// Block is why a stream cannot follow its tables: recorded in its
// definition (GET /v1/streams/{name}) and announced to its readers once
// by a `blocked` control event, because a log line alone reaches no one
// who reads the stream.
type Block struct {
	Reason  string            `json:"reason"`
	Journal string            `json:"journal"`
	From    string            `json:"from"`
	To      string            `json:"to"`
	Tables  []string          `json:"tables"`          // the stream's tables that moved
	Local   map[string]string `json:"local_positions"` // source shard -> last position before the cutover
	At      time.Time         `json:"at"`
}

// Block records b as the reason stream name cannot follow its tables.
// It reports whether b is new: a cutover already recorded (the journal
// is read again by every poll) is left alone.
func (r *Registry) Block(ctx context.Context, name string, b Block) (*Definition, bool, error) {
	fresh := false
	d, err := r.update(ctx, name, func(d *Definition) (*Definition, error) {
		fresh = false
		if d == nil {
			return nil, ErrNotFound
		}
		if d.Blocked != nil && d.Blocked.Journal == b.Journal {
			return nil, nil
		}
		if d.Keyspace != b.From {
			return nil, fmt.Errorf("stream %s reads keyspace %s, not %s", name, d.Keyspace, b.From)
		}
		d.Blocked, fresh = &b, true
		return d, nil
	})
	if err != nil {
		return nil, false, err
	}
	return d, fresh, nil
}

// MovedTables returns the tables of d that are among tables.
func (d *Definition) MovedTables(tables []string) []string {
	var out []string
	for _, t := range d.TableNames() {
		for _, m := range tables {
			if t == m {
				out = append(out, t)
			}
		}
	}
	return out
}
