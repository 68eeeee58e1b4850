package streams

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// Move is a MoveTables cutover a stream followed (DESIGN §4.1): its tables
// left keyspace From at the source shards' positions Local and continue
// in keyspace To at the target shards' positions Targets.
type Move struct {
	Journal string            `json:"journal"`
	From    string            `json:"from"`
	To      string            `json:"to"`
	Tables  []string          `json:"tables"`
	Local   map[string]string `json:"local_positions"`  // source shard -> last position before the cutover
	Targets map[string]string `json:"target_positions"` // target shard -> where the tables continue
	At      time.Time         `json:"at"`
}

// Origin is the keyspace the stream was defined on: where its cursors
// began, whatever keyspaces its tables moved to since.
func (d *Definition) Origin() string {
	if len(d.Moves) > 0 {
		return d.Moves[0].From
	}
	return d.Keyspace
}

// Follows reports whether the stream moves with a MoveTables cutover of
// tables out of keyspace: it reads that keyspace and every table it names
// moves. partial is set when only some of them do (or a /regex/ rule may
// match a moved table), which the stream cannot follow.
func (d *Definition) Follows(keyspace string, tables []string) (follows, partial bool) {
	if d.Keyspace != keyspace {
		return false, false
	}
	names := d.TableNames()
	moved := 0
	for _, t := range names {
		if slices.Contains(tables, t) {
			moved++
		}
	}
	regex := len(names) < len(d.Tables)+len(d.Rules)
	switch {
	case moved == 0:
		return false, false
	case moved == len(names) && !regex:
		return true, false
	default:
		return false, true
	}
}

// Moved returns when the stream last changed keyspace (its creation if
// never).
func (d *Definition) Moved() time.Time {
	if n := len(d.Moves); n > 0 {
		return d.Moves[n-1].At
	}
	return d.CreatedAt
}

// Move records that the tables of stream name moved: its keyspace becomes
// m.To. It is idempotent (a move already recorded is left alone) and
// reads the stored definition, not the cache.
func (r *Registry) Move(ctx context.Context, name string, m Move) (*Definition, error) {
	return r.update(ctx, name, func(d *Definition) (*Definition, error) {
		if d == nil {
			return nil, ErrNotFound
		}
		for _, have := range d.Moves {
			if have.Journal == m.Journal {
				return nil, nil
			}
		}
		if d.Keyspace != m.From {
			return nil, fmt.Errorf("stream %s reads keyspace %s, not %s", name, d.Keyspace, m.From)
		}
		d.Moves = append(d.Moves, m)
		d.Keyspace = m.To
		return d, nil
	})
}

// Fresh returns the stored definition, bypassing the cache.
func (r *Registry) Fresh(ctx context.Context, name string) (*Definition, error) {
	return r.fetch(ctx, name)
}
