package source

import (
	"context"
	"fmt"
	"testing"

	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"

	"github.com/vstream-gateway/vstream-gateway/internal/fakevtgate"
)

// BenchmarkAssemble feeds the assembler committed transactions as vtgate
// streams them (BEGIN, ROW events, VGTID, COMMIT) with a heartbeat between
// them: the path every event of a stream takes. ns/op and allocs/op are
// per transaction.
func BenchmarkAssemble(b *testing.B) {
	s0 := fakevtgate.Shard{Keyspace: "ks", Name: "0"}
	field := s0.Field("t", fakevtgate.BigintPK("id"), fakevtgate.LongText("doc"))
	for _, rows := range []int{1, 10, 100} {
		b.Run(fmt.Sprintf("rows=%d", rows), func(b *testing.B) {
			var events []*binlogdatapb.VEvent
			for i := range rows {
				events = append(events, s0.Insert("t", 100, []string{fmt.Sprint(i + 1), `{"a":1,"b":"two"}`}))
			}
			txn := s0.Txn(100, fakevtgate.VGtid("ks", "0", "MariaDB/0-1-11"), events...)
			txn = append(txn, fakevtgate.Heartbeat())
			// The schema is known: the benchmark does not ask vtgate.
			schema := &schemaCache{tables: map[string]map[string]bool{"ks.t": {}}}
			a := newAssembler(Spec{Name: "bench", Keyspace: "ks"}, schema, fakevtgate.VGtid("ks", "0", "MariaDB/0-1-10"), nil, 0, 0)
			ctx := context.Background()
			if _, err := a.add(ctx, field); err != nil {
				b.Fatal(err)
			}
			out := 0
			b.ReportAllocs()
			for b.Loop() {
				for _, ev := range txn {
					t, err := a.add(ctx, ev)
					if err != nil {
						b.Fatal(err)
					}
					if t != nil {
						out += len(t.Events)
					}
				}
			}
			if out != rows*b.N {
				b.Fatalf("%d events out of %d transactions of %d rows", out, b.N, rows)
			}
		})
	}
}
