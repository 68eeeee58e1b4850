package source

import (
	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"
	querypb "vitess.io/vitess/go/vt/proto/query"

	"github.com/vstream-gateway/vstream-gateway/event"
)

// keyColumns are a table's primary-key columns: their FIELD entries and
// their positions in a row.
type keyColumns struct {
	fields []*querypb.Field
	index  []int
}

// keyColumnsOf reads the primary key from a FIELD event; nil when the table
// has none (then no cursor can be made inside a copy batch of it).
func keyColumnsOf(fe *binlogdatapb.FieldEvent) *keyColumns {
	k := &keyColumns{}
	for i, f := range fe.Fields {
		if f.Flags&uint32(querypb.MySqlFlag_PRI_KEY_FLAG) != 0 {
			k.fields = append(k.fields, f)
			k.index = append(k.index, i)
		}
	}
	if len(k.fields) == 0 {
		return nil
	}
	return k
}

// copyKey extracts a row's key values (a copy of them: the row's buffer is
// gRPC's).
func (k *keyColumns) copyKey(row *querypb.Row) *event.CopyKey {
	if k == nil || row == nil {
		return nil
	}
	// Offsets of every column up to the last key column.
	last := k.index[len(k.index)-1]
	if last >= len(row.Lengths) {
		return nil
	}
	offsets := make([]int64, last+1)
	var off int64
	for i := 0; i <= last; i++ {
		offsets[i] = off
		if n := row.Lengths[i]; n > 0 {
			off += n
		}
	}
	out := &querypb.Row{Lengths: make([]int64, len(k.index))}
	for j, i := range k.index {
		n := row.Lengths[i]
		out.Lengths[j] = n
		if n > 0 {
			if offsets[i]+n > int64(len(row.Values)) {
				return nil
			}
			out.Values = append(out.Values, row.Values[offsets[i]:offsets[i]+n]...)
		}
	}
	return &event.CopyKey{Fields: k.fields, Values: out}
}
