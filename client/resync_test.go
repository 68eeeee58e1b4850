package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/vstream-gateway/vstream-gateway/client"
)

// A cursor whose shards were resharded away with no journal to bridge
// them cannot be resumed exactly: the stream starts with a Resync event.
// The resync hook runs before the transaction holding it is returned; an
// error from the hook is returned by Next, which tries again next time.
func TestResyncHook(t *testing.T) {
	g := startGateway(t)
	c := dial(t, g.url, client.WithStart("now"))
	before := len(g.log.written())
	g.log.append(3)
	_, last := readRows(t, c, g.log.written()[before:])
	c.Close()

	// Shard 0 is gone; the gateway restarts, so that no tail of the
	// stream holds the cursor's transactions in memory.
	g.fake.SetTopology(ks, []string{"-80", "80-"}, nil)
	g.restart(t)
	var hooked []*client.Resync
	errReload := errors.New("the snapshot table is locked")
	c = dial(t, g.url, client.WithCursor(last.Cursor), client.WithOnResync(func(_ context.Context, r *client.Resync) error {
		hooked = append(hooked, r)
		if len(hooked) == 1 {
			return errReload
		}
		return nil
	}))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := c.Next(ctx); !errors.Is(err, errReload) {
		t.Fatalf("Next with a failing hook: %v", err)
	}
	txn, err := c.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r, ok := txn.Events[0].(*client.Resync)
	if !ok || r.Reason != "shards_gone" || len(hooked) != 2 || hooked[1] != r {
		t.Fatalf("first transaction %+v (hook called with %v), want the resync (shards_gone) it was called with twice", txn.Events, hooked)
	}
	if txn.Cursor == "" {
		t.Fatal("the resync has no cursor")
	}
}
