package source_test

import (
	"context"
	"errors"
	"testing"
	"time"

	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"

	"github.com/vstream-gateway/vstream-gateway/internal/fakevtgate"
	"github.com/vstream-gateway/vstream-gateway/source"
)

// Closing the client ends its readers before the connection closes: a
// reader's goroutine calling VStream on a closed connection raced with the
// close (the race detector's report, or a nil dereference at shutdown). A
// reader opened afterwards fails at once.
func TestCloseEndsReaders(t *testing.T) {
	fake := fakevtgate.New(t)
	fake.SetCreateTable("t", tText)
	c := dial(t, fake)
	// The stream stays open after its transaction; a stream that ends
	// would be reopened, which is what raced with Close.
	fake.Push(fakevtgate.Script{Open: true, Batches: [][]*binlogdatapb.VEvent{
		s0.Txn(101, pos(11), tField, s0.Insert("t", 101, []string{"1", "a"})),
	}})
	r := c.Open(context.Background(), spec, pos(10))
	defer r.Close()
	next(t, r)

	closed := make(chan struct{})
	go func() { c.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(30 * time.Second):
		t.Fatal("Close did not return with a reader open")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		if _, err := r.Next(ctx); err != nil {
			if ctx.Err() != nil {
				t.Fatal("the reader goes on after its client closed")
			}
			break
		}
	}
	late := c.Open(context.Background(), spec, pos(11))
	defer late.Close()
	if _, err := late.Next(ctx); !errors.Is(err, source.ErrClientClosed) {
		t.Fatalf("a reader opened on a closed client: %v, want ErrClientClosed", err)
	}
}
