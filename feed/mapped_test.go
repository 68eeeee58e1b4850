package feed

import (
	"context"
	"testing"

	"github.com/vstream-gateway/vstream-gateway/hub"
)

// splitRecorder is a reader that records the room it was told.
type splitRecorder struct{ rows []int }

func (*splitRecorder) Next(context.Context) (*hub.Delivery, error)          { return nil, context.Canceled }
func (*splitRecorder) TryNext(context.Context) (*hub.Delivery, bool, error) { return nil, false, nil }
func (s *splitRecorder) SplitCopy(rows int)                                 { s.rows = append(s.rows, rows) }

// A mapped reader passes the collector's room on to the reader under it,
// so that a snapshot read through a format or a token's scope still pages
// by limit; one over a reader that cannot split ignores it.
func TestMappedSplitsCopies(t *testing.T) {
	rec := &splitRecorder{}
	m := Mapped(rec, func(d *hub.Delivery) *hub.Delivery { return d })
	cs, ok := m.(copySplitter)
	if !ok {
		t.Fatal("a mapped reader does not take the collector's room")
	}
	cs.SplitCopy(7)
	if len(rec.rows) != 1 || rec.rows[0] != 7 {
		t.Fatalf("the reader under it was told %v, want [7]", rec.rows)
	}
	Mapped(struct{ Reader }{rec}, func(d *hub.Delivery) *hub.Delivery { return d }).(copySplitter).SplitCopy(3)
	if len(rec.rows) != 1 {
		t.Fatalf("a reader without SplitCopy was split: %v", rec.rows)
	}
}
