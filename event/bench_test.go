package event

import (
	"testing"

	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"
	querypb "vitess.io/vitess/go/vt/proto/query"
)

// benchCustomer is a typical 7-column customer row.
func benchCustomer(b *testing.B) (*Table, *binlogdatapb.RowChange) {
	fe := &binlogdatapb.FieldEvent{TableName: "customer", Fields: []*querypb.Field{
		fld("customer_id", querypb.Type_INT64, flPKAuto, 20, 0, 63, "bigint(20)"),
		fld("email", querypb.Type_VARCHAR, 0, 1020, 0, 45, "varchar(255)"),
		fld("name", querypb.Type_VARCHAR, 0, 400, 0, 224, "varchar(100)"),
		fld("status", querypb.Type_ENUM, flEnum, 32, 0, 45, "enum('active','suspended','closed')"),
		fld("balance", querypb.Type_DECIMAL, flNum, 14, 2, 63, "decimal(12,2)"),
		fld("created_at", querypb.Type_TIMESTAMP, flUnsigned|flBinary, 26, 6, 63, "timestamp(6)"),
		fld("updated_at", querypb.Type_DATETIME, flBinary, 19, 0, 63, "datetime"),
	}}
	tbl, err := NewTable("customer", "-80", fe, Options{})
	if err != nil {
		b.Fatal(err)
	}
	r := row("1234567", "jane.doe@example.com", "Jane Doe", "active", "1520.75",
		"2024-06-01 07:34:56.123456", "2024-06-01 12:34:56")
	return tbl, &binlogdatapb.RowChange{After: r}
}

func BenchmarkEncodeCustomer(b *testing.B) {
	tbl, rc := benchCustomer(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := tbl.Encode(OpInsert, rc, 1796223662); err != nil {
			b.Fatal(err)
		}
	}
	reportRowsPerSec(b)
}

// BenchmarkEncodeCustomerSlab is the gateway's own path: bodies cut from
// a slab, as the VStream reader encodes rows.
func BenchmarkEncodeCustomerSlab(b *testing.B) {
	tbl, rc := benchCustomer(b)
	var slab Slab
	b.ReportAllocs()
	for b.Loop() {
		if _, err := tbl.EncodeIn(&slab, OpInsert, rc, 1796223662); err != nil {
			b.Fatal(err)
		}
	}
	reportRowsPerSec(b)
}

func BenchmarkEncodeCustomerUpdate(b *testing.B) {
	tbl, rc := benchCustomer(b)
	rc = &binlogdatapb.RowChange{Before: rc.After, After: rc.After}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := tbl.Encode(OpUpdate, rc, 1796223662); err != nil {
			b.Fatal(err)
		}
	}
	reportRowsPerSec(b)
}

func BenchmarkAppendChangeCustomer(b *testing.B) {
	tbl, rc := benchCustomer(b)
	buf := make([]byte, 0, 1024)
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if buf, err = tbl.AppendChange(buf[:0], OpInsert, rc, 1796223662); err != nil {
			b.Fatal(err)
		}
	}
	reportRowsPerSec(b)
}

func benchAllTypes(b *testing.B, copyPhase bool) {
	fe := &binlogdatapb.FieldEvent{TableName: "alltypes", Fields: allTypesFields()}
	tbl, err := NewTable("commerce", "0", fe, allTypesJSON)
	if err != nil {
		b.Fatal(err)
	}
	r, _ := allTypesRow(0, copyPhase)
	op := OpInsert
	if copyPhase {
		op = OpSnapshot
	}
	rc := &binlogdatapb.RowChange{After: r}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := tbl.Encode(op, rc, 1796223662); err != nil {
			b.Fatal(err)
		}
	}
	reportRowsPerSec(b)
}

func BenchmarkEncodeAllTypesBinlog(b *testing.B) { benchAllTypes(b, false) }
func BenchmarkEncodeAllTypesCopy(b *testing.B)   { benchAllTypes(b, true) }

func reportRowsPerSec(b *testing.B) {
	if s := b.Elapsed().Seconds(); s > 0 {
		b.ReportMetric(float64(b.N)/s, "rows/s")
	}
}

// BenchmarkAppendJSON finishes an encoded event with its cursor, as every
// transport does for every event it sends ("cursor"), and the last event of
// a transaction on the WebSocket ("txn_end").
func BenchmarkAppendJSON(b *testing.B) {
	tbl, rc := benchCustomer(b)
	e, err := tbl.Encode(OpInsert, rc, 1796223662)
	if err != nil {
		b.Fatal(err)
	}
	const cursor = "CgZjdXN0b21lchIDLTgwGjJNeVNRTDU2LzNlMTFmYTQ3LTcxY2EtMTFlMS05ZTMzLWM4MGFhOTQyOTU2MjoxLTEyMzQ1"
	for _, c := range []struct {
		name   string
		append func([]byte, string) []byte
	}{{"cursor", e.AppendJSON}, {"txn_end", e.AppendWithTxnEnd}} {
		b.Run(c.name, func(b *testing.B) {
			buf := make([]byte, 0, 1024)
			b.ReportAllocs()
			for b.Loop() {
				buf = c.append(buf[:0], cursor)
			}
		})
	}
}
