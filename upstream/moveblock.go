package upstream

import (
	"context"
	"time"

	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"

	"github.com/vstream-gateway/vstream-gateway/event"
	"github.com/vstream-gateway/vstream-gateway/position"
	"github.com/vstream-gateway/vstream-gateway/source"
	"github.com/vstream-gateway/vstream-gateway/streams"
)

// Partial moves (DESIGN §4.1). A MoveTables cutover that moves only some
// of a stream's tables cannot be followed: the stream reads one keyspace.
// The server records it in the definition (streams.Block); a reader that
// crosses the cutover gets a `blocked` control event once, after the last
// transaction before it, so that a client learns why the moved tables go
// quiet instead of reading a log it never sees.

// blockLocal is the position the source shards of b stopped at.
func blockLocal(b *streams.Block) position.Position {
	var shards []position.Shard
	for s, g := range b.Local {
		shards = append(shards, position.Entry(b.From, s, g))
	}
	return position.New(shards...)
}

// applicableBlock is the recorded block of the stream still ahead of a
// reader that entered ks at entry (its cutover at or after entry), or nil.
func (m *movingSource) applicableBlock(ctx context.Context, ks string, entry *binlogdatapb.VGtid) (*streams.Block, error) {
	if entry == nil {
		return nil, nil
	}
	b, err := m.u.moves.Blocked(ctx, m.def.Name)
	if err != nil || b == nil || b.From != ks || len(b.Local) == 0 {
		return nil, err
	}
	if !blockLocal(b).Covers(position.Of(entry).InKeyspace(ks)) {
		return nil, nil // a reader that began after the cutover
	}
	return b, nil
}

// announceBlock queues the `blocked` notice once the reader has passed
// the cutover on every source shard.
func (m *movingSource) announceBlock() {
	b := m.block
	if b == nil || m.blockSaid == b.Journal || !position.Of(m.pos).Covers(blockLocal(b)) {
		return
	}
	m.blockSaid = b.Journal
	notice := event.Control(event.TypeBlocked, b.From, "", map[string]any{
		"reason": b.Reason, "tables": b.Tables, "from": b.From, "to": b.To, "journal": b.Journal,
		"message": "MoveTables moved only some of the stream's tables: the stream cannot follow them (it reads one keyspace) and reads " +
			b.From + " on, where the moved tables get no new rows; define a stream on " + b.To + " for them",
	})
	m.out = append(m.out, &source.Txn{VGtid: m.pos, Events: []event.Event{notice}, Received: time.Now()})
	m.u.log.Warn("stream blocked: its tables moved in part", "stream", m.def.Name, "from", b.From, "to", b.To, "tables", b.Tables)
}
