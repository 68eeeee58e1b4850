package hub

import (
	"context"
	"strings"
	"testing"

	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"

	"github.com/vstream-gateway/vstream-gateway/event"
	"github.com/vstream-gateway/vstream-gateway/internal/fakevtgate"
	"github.com/vstream-gateway/vstream-gateway/source"
)

// spooledChunked gives alice (acked at -80:10, 80-:10) a bridge whose spool
// holds, in order: id 1 on -80; a chunked transaction on 80- in three
// pieces (ids 2 3 | 4 | 5), the pieces at the position before it; id 6 on
// -80. The stream continues on shard 0 at pos(50).
func spooledChunked(t *testing.T) *env {
	t.Helper()
	return withSpool(t,
		&source.Txn{VGtid: mergePos(11, 10), Events: []event.Event{spoolRow("-80", 1)}},
		&source.Txn{VGtid: mergePos(11, 10), Events: []event.Event{spoolRow("80-", 2), spoolRow("80-", 3)}, Partial: true},
		&source.Txn{VGtid: mergePos(11, 10), Events: []event.Event{spoolRow("80-", 4)}, Partial: true, Continued: true},
		&source.Txn{VGtid: mergePos(11, 11), Events: []event.Event{spoolRow("80-", 5)}, Continued: true},
		&source.Txn{VGtid: mergePos(12, 11), Events: []event.Event{spoolRow("-80", 6)}},
	)
}

// A spool keeps a chunked transaction's pieces with their marks, and a
// cursor inside the spool resumes correctly around it: before it (the
// pieces' own position, which does not mean they were read), past it on
// its shard only (its pieces skipped with its end), behind it on its
// shard only, and inside it (a pull cursor: position and events read).
func TestSpoolChunkedTransaction(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name string
		from func(e *env) string
		want string // deliveries, pieces marked "…" until the last
	}{
		{"acked position", func(e *env) string { return e.token(t, mergePos(10, 10)) }, "1 | 2 3… | 4… | 5 | 6"},
		{"before the chunked transaction", func(e *env) string { return e.token(t, mergePos(11, 10)) }, "2 3… | 4… | 5 | 6"},
		{"past it on 80- only", func(e *env) string { return e.token(t, mergePos(10, 11)) }, "1 | 6"},
		{"past everything on -80", func(e *env) string { return e.token(t, mergePos(12, 10)) }, "2 3… | 4… | 5"},
		{"after it", func(e *env) string { return e.token(t, mergePos(11, 11)) }, "6"},
		{"inside it, 2 events read", func(e *env) string {
			tok, err := e.hub.codec.EncodeIn(ctx, scope(e.def), mergePos(11, 10), 2)
			if err != nil {
				t.Fatal(err)
			}
			return tok
		}, "4… | 5 | 6"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := spooledChunked(t)
			s := e.open(t, From{Token: c.from(e), Subscriber: "alice"})
			s0 := fakevtgate.Shard{Keyspace: ks, Name: "0"}
			e.fake.Push(fakevtgate.Script{Open: true, Batches: [][]*binlogdatapb.VEvent{s0.Txn(100, pos(51), field(s0), row(s0, "7"))}})
			var got []string
			for len(got) < 10 {
				d := next(t, s)
				if len(d.Events) == 0 {
					continue
				}
				sum := summary(t, d.Txn)
				if sum == "7" {
					break
				}
				if d.Partial {
					sum += "…"
					if d.Cursor != "" {
						t.Fatalf("piece %s with a cursor", sum)
					}
				}
				got = append(got, sum)
			}
			if strings.Join(got, " | ") != c.want {
				t.Fatalf("got %s, want %s", strings.Join(got, " | "), c.want)
			}
		})
	}
}
