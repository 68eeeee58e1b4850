package event

import (
	"encoding/json"
	"testing"

	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"
	querypb "vitess.io/vitess/go/vt/proto/query"
)

// FuzzEncode feeds arbitrary rows to the alltypes table, and the same
// bytes as a single value to the encoder of column col. Whatever the
// input, the encoder must not panic, and whatever it returns without error
// must be valid JSON.
//
// lens gives the row's Lengths, one byte per value: 255 is NULL (-1), 254
// an invalid negative length, anything else a byte count. The value count
// is the table's column count unless flags&1, then len(lens). flags>>1
// picks the op; snapshot rows are parsed as copy-phase rows.
func FuzzEncode(f *testing.F) {
	fe := &binlogdatapb.FieldEvent{TableName: "alltypes", Fields: allTypesFields()}
	tbl, err := NewTable("commerce", "0", fe, allTypesJSON)
	if err != nil {
		f.Fatal(err)
	}
	single := make([]*Table, len(allTypes))
	for i, c := range allTypes {
		single[i], err = NewTable("commerce", "0",
			&binlogdatapb.FieldEvent{TableName: "alltypes", Fields: []*querypb.Field{c.field}}, allTypesJSON)
		if err != nil {
			f.Fatal(err)
		}
	}

	for k := 0; k < 6; k++ {
		for _, copyPhase := range []bool{false, true} {
			r, _ := allTypesRow(k, copyPhase)
			lens := make([]byte, len(r.Lengths))
			for i, l := range r.Lengths {
				if l < 0 || l > 253 {
					l = 255
				}
				lens[i] = byte(l)
			}
			op := uint8(0) // insert
			if copyPhase {
				op = 3 // snapshot
			}
			f.Add(lens, r.Values, uint8(k), op<<1)
		}
	}
	for i, c := range allTypes {
		for _, s := range c.samples {
			f.Add([]byte{byte(len(s.binlog))}, s.binlog, uint8(i), uint8(1))
			if s.copyV != nil {
				f.Add([]byte{byte(len(s.copyV))}, s.copyV, uint8(i), uint8(3<<1|1))
			}
		}
	}

	f.Fuzz(func(t *testing.T, lens, values []byte, col, flags uint8) {
		n := len(allTypes)
		if flags&1 != 0 {
			n = len(lens)
		}
		row := &querypb.Row{Lengths: make([]int64, n), Values: values}
		for i := range row.Lengths {
			switch {
			case i >= len(lens):
				row.Lengths[i] = 0
			case lens[i] == 255:
				row.Lengths[i] = -1
			case lens[i] == 254:
				row.Lengths[i] = -2
			default:
				row.Lengths[i] = int64(lens[i])
			}
		}
		op := allOps[int(flags>>1)%numOps]
		check(t, tbl, op, &binlogdatapb.RowChange{Before: row, After: row})

		// The same bytes as one value of one type.
		one := &querypb.Row{Lengths: []int64{int64(len(values))}, Values: values}
		st := single[int(col)%len(single)]
		check(t, st, op, &binlogdatapb.RowChange{Before: one, After: one})
		if out, err := st.AppendRow(nil, one, op == OpSnapshot); err == nil && !json.Valid(out) {
			t.Fatalf("%s: invalid row JSON %q from %q", st.cols[0].name, out, values)
		}
	})
}

func check(t *testing.T, tbl *Table, op Op, rc *binlogdatapb.RowChange) {
	t.Helper()
	ev, err := tbl.Encode(op, rc, 1796223662)
	if err != nil {
		if _, ok := err.(*RowError); !ok {
			t.Fatalf("error of type %T: %v", err, err)
		}
		return
	}
	full := ev.AppendJSON(nil, "c1")
	if !json.Valid(full) {
		t.Fatalf("invalid JSON: %q", full)
	}
}
