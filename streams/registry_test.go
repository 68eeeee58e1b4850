package streams

import (
	"context"
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vstream-gateway/vstream-gateway/store"
	"github.com/vstream-gateway/vstream-gateway/store/boltstore"
)

// hungStore's Get blocks until its context ends while hung is set, as a
// Redis that stopped answering does.
type hungStore struct {
	store.Store
	hung atomic.Bool
}

func (h *hungStore) Get(ctx context.Context, ns, key string) ([]byte, error) {
	if h.hung.Load() {
		<-ctx.Done()
		return nil, errors.Join(store.ErrUnavailable, ctx.Err())
	}
	return h.Store.Get(ctx, ns, key)
}

// TestRegistryServesCachedWhileStoreHangs: a reader's stream lookup never
// waits on a store that does not answer once the definition is cached; a
// deletion made elsewhere is still seen once the store answers.
func TestRegistryServesCachedWhileStoreHangs(t *testing.T) {
	bolt, err := boltstore.Open(filepath.Join(t.TempDir(), "vsg.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer bolt.Close()
	st := &hungStore{Store: bolt}
	r := NewRegistry(st, nil)
	ctx := context.Background()
	if err := r.Create(ctx, &Definition{Name: "s", Keyspace: "ks", Tables: []string{"t"}}); err != nil {
		t.Fatal(err)
	}
	// Make the cached copy stale.
	r.mu.Lock()
	r.fetched["s"] = time.Now().Add(-2 * refreshEvery)
	r.mu.Unlock()
	st.hung.Store(true)
	start := time.Now()
	if d, err := r.Get(ctx, "s"); err != nil || d.Name != "s" {
		t.Fatalf("Get while the store hangs: %v, %v", d, err)
	}
	if took := time.Since(start); took > 100*time.Millisecond {
		t.Fatalf("Get waited %v on a hung store with the definition cached", took)
	}
	// A miss does go to the store, and fails with it.
	cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := r.Get(cctx, "other"); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Get of an uncached stream while the store hangs: %v", err)
	}
	// Deleted elsewhere; the store answers again: the next lookups find out.
	st.hung.Store(false)
	if err := bolt.Delete(ctx, ns, "s"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		r.mu.Lock()
		r.fetched["s"] = time.Now().Add(-2 * refreshEvery) // as if refreshEvery passed
		r.mu.Unlock()
		if _, err := r.Get(ctx, "s"); errors.Is(err, ErrNotFound) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a definition deleted in the store is still served")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
