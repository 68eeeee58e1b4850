package reshard

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	topodatapb "vitess.io/vitess/go/vt/proto/topodata"

	"github.com/vstream-gateway/vstream-gateway/store/boltstore"
)

// blockingVtctld answers journal reads only when released (or when the
// read's context ends), with the captured row of a MoveTables journal.
type blockingVtctld struct {
	entered chan struct{} // a journal read began
	release chan struct{}
}

func (b *blockingVtctld) RoutedTables(context.Context) (map[string]bool, error) {
	return map[string]bool{}, nil
}

func (b *blockingVtctld) Primaries(context.Context, string) (map[string]*topodatapb.TabletAlias, error) {
	return map[string]*topodatapb.TabletAlias{"0": {Cell: "zone1", Uid: 200}}, nil
}

func (b *blockingVtctld) JournalRows(ctx context.Context, _ *topodatapb.TabletAlias, _ string) ([][]byte, error) {
	select {
	case b.entered <- struct{}{}:
	default:
	}
	select {
	case <-b.release:
		return [][]byte{[]byte(journalCustomerToCommerce)}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// A journal read is shared by every reader of a keyspace waiting for it;
// the one that started it giving up must not fail it for the others.
func TestMoverSyncSurvivesFirstCallerLeaving(t *testing.T) {
	st, err := boltstore.Open(filepath.Join(t.TempDir(), "state.db"), boltstore.WithNoSync())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	vt := &blockingVtctld{entered: make(chan struct{}, 1), release: make(chan struct{})}
	reg := NewRegistry(st)
	m := NewMover(vt, reg, st, func(context.Context) ([]string, error) { return []string{"customer"}, nil },
		func(context.Context, *Journal) error { return nil }, WithMoverLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))

	before := time.Now()
	first, leave := context.WithCancel(context.Background())
	firstErr := make(chan error, 1)
	go func() { firstErr <- m.Sync(first, "customer", before) }()
	select {
	case <-vt.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the journal read did not start")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	otherErr := make(chan error, 1)
	go func() { otherErr <- m.Sync(ctx, "customer", before) }() // shares the read in progress
	leave()
	if err := <-firstErr; !errors.Is(err, context.Canceled) {
		t.Fatalf("the caller that left: %v, want context.Canceled", err)
	}
	close(vt.release)
	if err := <-otherErr; err != nil {
		t.Fatalf("the caller still waiting: %v (the read was run on the first caller's context)", err)
	}
	js, err := reg.List(ctx, "customer")
	if err != nil || len(js) != 1 || !js[0].Moves() {
		t.Fatalf("recorded journals %+v, %v", js, err)
	}
}
