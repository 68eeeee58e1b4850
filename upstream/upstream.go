// Package upstream opens a stream's transactions at a position: one
// VStream on the keyspace the position is on, followed across MoveTables
// cutovers to the keyspace the stream's tables moved to (DESIGN §4.1),
// and watched for the stream's tables being dropped. It is the step
// between source/ (one VStream) and hub/ (who reads what, and from
// where): every VStream the hub opens for a reader or a tail comes from
// here.
package upstream

import (
	"context"
	"log/slog"
	"time"

	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"

	"github.com/vstream-gateway/vstream-gateway/position"
	"github.com/vstream-gateway/vstream-gateway/source"
	"github.com/vstream-gateway/vstream-gateway/streams"
)

// Stream is a stream's transactions in order, as Open returns them.
type Stream interface {
	// Next blocks for the next transaction.
	Next(ctx context.Context) (*source.Txn, error)
	// TryNext returns a transaction only if one is ready now.
	TryNext() (*source.Txn, bool, error)
	// Buffered counts the transactions ready to read.
	Buffered() int
	Close()
}

// Opener opens VStreams; *source.Client is the production one.
type Opener interface {
	Open(ctx context.Context, spec source.Spec, from *binlogdatapb.VGtid, opts ...source.ReadOption) *source.Reader
}

// MoveWatch is what a stream asks to follow MoveTables cutovers; the server
// builds it from reshard.Mover and the stream registry.
type MoveWatch interface {
	// Pending reports whether a MoveTables workflow involves one of
	// tables of keyspace.
	Pending(keyspace string, tables []string) bool
	// Fresh returns once a read of the routing rules that began at or
	// after `after` is done: Pending then answers from it.
	Fresh(ctx context.Context, after time.Time) error
	// Sync returns once a journal read of keyspace that began at or after
	// `after` is done and any cutover it found is recorded in the streams'
	// definitions.
	Sync(ctx context.Context, keyspace string, after time.Time) error
	// Blocked returns why the stream cannot follow its tables, nil when
	// nothing blocks it (stored, not cached).
	Blocked(ctx context.Context, stream string) (*streams.Block, error)
	// Moves returns the moves the stream has followed (stored, not cached).
	Moves(ctx context.Context, stream string) ([]streams.Move, error)
	// Completed reports whether the workflow that moved tables out of
	// keyspace is completed: its source tables are dropped, and a cursor
	// behind its cutover can no longer be read there.
	Completed(ctx context.Context, keyspace string, tables []string) (bool, error)
}

// Upstream opens streams.
type Upstream struct {
	src   Opener
	moves MoveWatch // nil: MoveTables cutovers are not followed
	log   *slog.Logger
}

// New returns an Upstream reading src. moves may be nil: a stream then
// reads the keyspace of its position only, and a MoveTables complete
// ends it with a TablesDroppedError (or a resync).
func New(src Opener, moves MoveWatch, log *slog.Logger) *Upstream {
	if log == nil {
		log = slog.Default()
	}
	return &Upstream{src: src, moves: moves, log: log}
}

// Follows reports whether streams follow MoveTables cutovers.
func (u *Upstream) Follows() bool { return u.moves != nil }

// Open returns the stream of def from pos, on the keyspace pos is on (a
// stream whose tables moved is read on their new keyspace). opts apply to
// the VStream opened at pos, not to the target keyspace's after a move.
func (u *Upstream) Open(ctx context.Context, def *streams.Definition, pos *binlogdatapb.VGtid, opts ...source.ReadOption) Stream {
	ks := position.Of(pos).Keyspace(def.Keyspace)
	if u.moves == nil {
		sp := spec(def, ks)
		return u.watchDropped(ctx, def, sp, u.src.Open(ctx, sp, pos, opts...))
	}
	m := &movingSource{u: u, def: def, pos: pos, ks: ks, opts: opts}
	m.ctx, m.cancel = context.WithCancel(ctx)
	if replicating(pos) {
		m.entry = pos
	}
	return m
}

func spec(def *streams.Definition, keyspace string) source.Spec {
	return source.Spec{Name: def.Name, Keyspace: keyspace, Rules: def.VitessRules()}
}

// replicating reports whether pos is a concrete position past any copy:
// where reading a keyspace begins (a copy phase has no cutover to cross
// yet) and what a tail can serve.
func replicating(pos *binlogdatapb.VGtid) bool {
	p := position.Of(pos)
	return p.Concrete() && !p.Copying()
}
