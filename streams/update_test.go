package streams

import (
	"context"
	"path/filepath"
	"sync"
	"testing"

	"github.com/vstream-gateway/vstream-gateway/store"
	"github.com/vstream-gateway/vstream-gateway/store/boltstore"
)

// interleaved is a store on which a competing write runs between a read
// of a definition and what its reader does next: the read returns the
// definition as it was, then the competing write lands.
type interleaved struct {
	store.Store
	mu   sync.Mutex
	then func()
}

func (s *interleaved) Get(ctx context.Context, ns, key string) ([]byte, error) {
	v, err := s.Store.Get(ctx, ns, key)
	s.mu.Lock()
	then := s.then
	s.then = nil
	s.mu.Unlock()
	if then != nil {
		then()
	}
	return v, err
}

// Two replicas: one applies the streams file (Upsert) while the other
// records a MoveTables cutover of the stream (Move) between the first's
// read and write. The move must survive: written over, the stream would
// read the keyspace its tables left.
func TestUpsertKeepsAConcurrentMove(t *testing.T) {
	ctx := context.Background()
	bolt, st := interleavedStore(t)
	mover, applier := NewRegistry(bolt, nil), NewRegistry(st, nil)
	def := func() *Definition { return &Definition{Name: "s", Keyspace: "ks", Tables: []string{"t"}} }
	if err := mover.Create(ctx, def()); err != nil {
		t.Fatal(err)
	}
	st.then = func() {
		if _, err := mover.Move(ctx, "s", Move{Journal: "j1", From: "ks", To: "ks2", Tables: []string{"t"}}); err != nil {
			t.Errorf("Move: %v", err)
		}
	}
	if err := applier.Upsert(ctx, def()); err != nil {
		t.Fatal(err)
	}
	got, err := mover.Fresh(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	if got.Keyspace != "ks2" || len(got.Moves) != 1 {
		t.Fatalf("stream after a move beside the streams file: keyspace %s, %d moves; want ks2 and the move", got.Keyspace, len(got.Moves))
	}
}

// A move read the definition, then the streams file changed its tables,
// then the move wrote: the change must survive.
func TestMoveKeepsAConcurrentUpsert(t *testing.T) {
	ctx := context.Background()
	bolt, st := interleavedStore(t)
	mover, applier := NewRegistry(st, nil), NewRegistry(bolt, nil)
	if err := applier.Create(ctx, &Definition{Name: "s", Keyspace: "ks", Tables: []string{"t"}}); err != nil {
		t.Fatal(err)
	}
	st.then = func() {
		if err := applier.Upsert(ctx, &Definition{Name: "s", Keyspace: "ks", Tables: []string{"t", "u"}}); err != nil {
			t.Errorf("Upsert: %v", err)
		}
	}
	if _, err := mover.Move(ctx, "s", Move{Journal: "j1", From: "ks", To: "ks2", Tables: []string{"t", "u"}}); err != nil {
		t.Fatal(err)
	}
	got, err := applier.Fresh(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	if got.Keyspace != "ks2" || len(got.Moves) != 1 || len(got.Tables) != 2 {
		t.Fatalf("stream after its tables changed beside a move: keyspace %s, %d moves, tables %v; want ks2, the move, t and u", got.Keyspace, len(got.Moves), got.Tables)
	}
}

// interleavedStore is an embedded store closed when the test ends, and the
// same store with a write run between a read and its compare-and-swap.
func interleavedStore(t *testing.T) (store.Store, *interleaved) {
	t.Helper()
	bolt, err := boltstore.Open(filepath.Join(t.TempDir(), "vsg.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bolt.Close() })
	return bolt, &interleaved{Store: bolt}
}
