package event_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"
	querypb "vitess.io/vitess/go/vt/proto/query"

	"github.com/vstream-gateway/vstream-gateway/cursor"
	"github.com/vstream-gateway/vstream-gateway/event"
	"github.com/vstream-gateway/vstream-gateway/event/debezium"
)

// benchCustomer is the default format's benchmark row (bench_test.go): a
// typical 7-column customer row.
func benchCustomer(b *testing.B) (*event.Table, *binlogdatapb.RowChange) {
	f := func(name string, typ querypb.Type, flags, length, decimals, cs uint32, ct string) *querypb.Field {
		return &querypb.Field{Name: name, Type: typ, Flags: flags, ColumnLength: length, Decimals: decimals, Charset: cs, ColumnType: ct}
	}
	pk := uint32(querypb.MySqlFlag_NOT_NULL_FLAG | querypb.MySqlFlag_PRI_KEY_FLAG | querypb.MySqlFlag_AUTO_INCREMENT_FLAG | querypb.MySqlFlag_PART_KEY_FLAG | querypb.MySqlFlag_NUM_FLAG)
	tbl, err := event.NewTable("customer", "-80", &binlogdatapb.FieldEvent{TableName: "customer", Fields: []*querypb.Field{
		f("customer_id", querypb.Type_INT64, pk, 20, 0, 63, "bigint(20)"),
		f("email", querypb.Type_VARCHAR, 0, 1020, 0, 45, "varchar(255)"),
		f("name", querypb.Type_VARCHAR, 0, 400, 0, 224, "varchar(100)"),
		f("status", querypb.Type_ENUM, 256, 32, 0, 45, "enum('active','suspended','closed')"),
		f("balance", querypb.Type_DECIMAL, 32768, 14, 2, 63, "decimal(12,2)"),
		f("created_at", querypb.Type_TIMESTAMP, 160, 26, 6, 63, "timestamp(6)"),
		f("updated_at", querypb.Type_DATETIME, 128, 19, 0, 63, "datetime"),
	}}, event.Options{})
	if err != nil {
		b.Fatal(err)
	}
	r := &querypb.Row{}
	for _, v := range []string{"1234567", "jane.doe@example.com", "Jane Doe", "active", "1520.75", "2024-06-01 07:34:56.123456", "2024-06-01 12:34:56"} {
		r.Lengths = append(r.Lengths, int64(len(v)))
		r.Values = append(r.Values, v...)
	}
	return tbl, &binlogdatapb.RowChange{After: r}
}

// BenchmarkFormatDefault is what a row costs in the default format: its
// encoding from vtgate's row, done once when the row arrives.
func BenchmarkFormatDefault(b *testing.B) {
	tbl, rc := benchCustomer(b)
	var slab event.Slab
	b.ReportAllocs()
	for b.Loop() {
		if _, err := tbl.EncodeIn(&slab, event.OpInsert, rc, docCommit); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFormatDebezium is what the Debezium format adds per row: the
// re-encoding of the default format's event, done once per transaction
// for all its Debezium readers, in transactions of 1 and of 100 rows.
func BenchmarkFormatDebezium(b *testing.B) {
	debeziumCases(b, []int{1, 100}, func(b *testing.B, txn debezium.Txn, o debezium.Options) {
		b.ReportAllocs()
		for b.Loop() {
			debezium.Encode(txn, o)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(txn.Events)), "ns/row")
	})
}

// BenchmarkFormatRatio measures both encodings in turns within each
// iteration — 100 rows in the default format, then the same 100 rows in
// the Debezium format (one transaction of 100, 10 of 10, or 100 of one) — and
// reports their ratio: on a shared machine whose speed drifts between
// runs, the two measured side by side give a steadier ratio than
// BenchmarkFormatDefault and BenchmarkFormatDebezium run one after the
// other.
//
// Each format writes the transaction's position in its own way, and pays
// for it once per transaction: the default format as the cursor token the
// tail mints for each transaction (cursor.Codec), the Debezium format as
// its source.vgtid and transaction.id strings, which Encode writes. So
// the default side is its rows' encoding plus one token per transaction,
// and the Debezium side is Encode (ratio). Also reported: the ratio
// against the rows' encoding alone (rows-ratio), and what serving the
// Debezium format costs in all, since it is made from the default
// format's events (chain: default + Debezium over default).
func BenchmarkFormatRatio(b *testing.B) {
	tbl, rc := benchCustomer(b)
	codec, err := cursor.NewCodec([]byte("bench-signing-key-0123456789"), nil)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	const rows = 100
	debeziumCases(b, []int{1, 10, 100}, func(b *testing.B, txn debezium.Txn, o debezium.Options) {
		var slab event.Slab
		var enc, tok, dbz time.Duration
		txns := rows / len(txn.Events)
		for b.Loop() {
			t0 := time.Now()
			for range rows {
				if _, err := tbl.EncodeIn(&slab, event.OpInsert, rc, docCommit); err != nil {
					b.Fatal(err)
				}
			}
			t1 := time.Now()
			for range txns {
				if _, err := codec.Encode(ctx, "app", txn.VGtid); err != nil {
					b.Fatal(err)
				}
			}
			t2 := time.Now()
			for range txns {
				debezium.Encode(txn, o)
			}
			enc, tok, dbz = enc+t1.Sub(t0), tok+t2.Sub(t1), dbz+time.Since(t2)
		}
		n := float64(b.N * rows)
		def := enc + tok
		b.ReportMetric(float64(def.Nanoseconds())/n, "default-ns/row")
		b.ReportMetric(float64(dbz.Nanoseconds())/n, "debezium-ns/row")
		b.ReportMetric(float64(dbz)/float64(def), "ratio")
		b.ReportMetric(float64(dbz)/float64(enc), "rows-ratio")
		b.ReportMetric(float64(def+dbz)/float64(def), "chain")
	})
}

// debeziumCases runs bench once per transaction size and with and without
// schemas, on a transaction of that many inserts of the benchmark row.
func debeziumCases(b *testing.B, sizes []int, bench func(b *testing.B, txn debezium.Txn, o debezium.Options)) {
	tbl, rc := benchCustomer(b)
	ev, err := tbl.Encode(event.OpInsert, rc, docCommit)
	if err != nil {
		b.Fatal(err)
	}
	for _, rows := range sizes {
		for _, schemas := range []bool{false, true} {
			name := "rows=" + strconv.Itoa(rows)
			if schemas {
				name += "/schemas"
			}
			b.Run(name, func(b *testing.B) {
				txn := debezium.Txn{Events: make([]event.Event, rows), VGtid: docVGtid, CommitTS: docCommit, Received: time.UnixMilli(docReceived)}
				for i := range txn.Events {
					txn.Events[i] = ev
				}
				bench(b, txn, debezium.Options{Stream: "app", Schemas: schemas})
			})
		}
	}
}

// FuzzDebezium puts arbitrary bytes in one column of an alltypes row, in
// either phase, and re-encodes every row the default format accepts: the
// Debezium event must be valid JSON with every column, and the key
// change rule must hold.
func FuzzDebezium(f *testing.F) {
	f.Add(uint8(0), false, []byte("42"))
	f.Add(uint8(22), true, []byte("0000-00-00"))
	f.Add(uint8(40), false, []byte(`{"a":"\u2028","b":[1,{"c":"\""}]}`))
	f.Add(uint8(38), false, []byte("x,y"))
	f.Add(uint8(19), false, []byte("\xff\x00"))
	fields := event.AllTypesFields()
	tbl, err := event.NewTable("commerce", "-80", &binlogdatapb.FieldEvent{TableName: "alltypes", Fields: fields}, event.AllTypesOptions)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, col uint8, copyPhase bool, v []byte) {
		c := int(col) % len(fields)
		base := event.AllTypesRow(int(col), copyPhase)
		row := &querypb.Row{}
		off := int64(0)
		for i, l := range base.Lengths {
			val := base.Values[off : off+max(l, 0)]
			off += max(l, 0)
			if i == c {
				val, l = v, int64(len(v))
			}
			row.Lengths = append(row.Lengths, l)
			row.Values = append(row.Values, val...)
		}
		op := event.OpInsert
		if copyPhase {
			op = event.OpSnapshot
		}
		before := event.AllTypesRow(int(col)+1, copyPhase)
		for _, rc := range []*binlogdatapb.RowChange{{After: row}, {Before: before, After: row}} {
			o := op
			if rc.Before != nil {
				o = event.OpUpdate
			}
			ev, err := tbl.Encode(o, rc, docCommit)
			if err != nil {
				return // refused by the default format, never delivered
			}
			out := debezium.Encode(debezium.Txn{Events: []event.Event{ev}, VGtid: docVGtid, CommitTS: docCommit, Received: time.UnixMilli(docReceived)}, debezium.Options{Stream: "s"})
			if len(out) != 1 && (o != event.OpUpdate || len(out) != 2) {
				t.Fatalf("%d events", len(out))
			}
			for _, e := range out {
				m := decode(t, e)
				for _, img := range []string{"before", "after"} {
					if x, ok := path(m, "value", img).(map[string]any); ok && len(x) != len(fields) {
						t.Fatalf("%s has %d columns: %s", img, len(x), e.JSON)
					}
				}
			}
		}
	})
}
