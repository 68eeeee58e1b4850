package webhook

import (
	"context"
	"github.com/vstream-gateway/vstream-gateway/internal/wait"
	"testing"
	"time"

	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"

	"github.com/vstream-gateway/vstream-gateway/hub"
	"github.com/vstream-gateway/vstream-gateway/source"
)

// An idle webhook in a copy phase stores its position too. A shard whose
// copy has not started has no GTID yet; resuming from such a position
// starts that shard's copy, which is exact, and a delivered batch stores
// the same kind of position.
func TestIdleWebhookStoresCopyPhasePosition(t *testing.T) {
	e := newEnv(t)
	r := newReceiver(t, nil)
	v := e.create(r.url(), nil)
	for range 3 {
		n := e.log.len() + 1
		pos := fakePos(n)
		pos.ShardGtids = append(pos.ShardGtids, &binlogdatapb.ShardGtid{Keyspace: "ks", Shard: "1"})
		e.log.mu.Lock()
		e.log.txns = append(e.log.txns, &source.Txn{VGtid: pos, Received: time.Now()})
		close(e.log.changed)
		e.log.changed = make(chan struct{})
		e.log.mu.Unlock()
	}
	e.supervise()
	wait.For(t, "the idle copy-phase position", 5*time.Second, func() bool {
		st, err := hub.NewCursors(e.st).Get(context.Background(), testDef.Name, SubscriberName(v.ID))
		return err == nil && len(st.VGtid.GetShardGtids()) == 2 && posN(st.VGtid) == 4
	})
	if len(r.messages()) != 0 {
		t.Fatal("an empty batch was sent")
	}
}
