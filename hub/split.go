package hub

import (
	"google.golang.org/protobuf/proto"
	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"
	querypb "vitess.io/vitess/go/vt/proto/query"

	"github.com/vstream-gateway/vstream-gateway/event"
	"github.com/vstream-gateway/vstream-gateway/source"
)

// A copy phase arrives in batches of thousands of rows, one transaction
// each, and a cursor existed only at their ends: a pull page with limit=5
// answered a whole batch. A cursor can be made after any copied row,
// though: the batch's position with the row's primary key as its table's
// last PK, from where vtgate resumes the copy. A subscription cuts such a
// batch as it delivers it, into pieces that fit what the reader has room
// for (a pull page's remaining limit).

// splitCopy cuts the first n rows off txn: the piece to deliver now, with a
// cursor right after its last row, and the rest with txn's own position.
// ok is false when txn is not a copy batch that can be cut, or fits.
func splitCopy(txn *source.Txn, n int) (first, rest *source.Txn, ok bool) {
	if n <= 0 || len(txn.Events) <= n || txn.Journal != nil {
		return nil, nil, false
	}
	head := txn.Events[0]
	for i := range txn.Events {
		e := &txn.Events[i]
		if e.Op != event.OpSnapshot || e.CopyKey == nil || e.Table != head.Table || e.Shard != head.Shard || e.Keyspace != head.Keyspace {
			return nil, nil, false
		}
	}
	v, ok := copyCursor(txn.VGtid, head.Keyspace, head.Shard, head.Table, txn.Events[n-1].CopyKey)
	if !ok {
		return nil, nil, false
	}
	f, r := *txn, *txn
	f.Events, f.VGtid = txn.Events[:n:n], v
	r.Events = txn.Events[n:]
	return &f, &r, true
}

// copyCursor is v with table's last PK on shard set to key: the position
// right after the row whose key it is.
func copyCursor(v *binlogdatapb.VGtid, keyspace, shard, table string, key *event.CopyKey) (*binlogdatapb.VGtid, bool) {
	out := proto.Clone(v).(*binlogdatapb.VGtid)
	for _, sg := range out.ShardGtids {
		if sg.Keyspace != keyspace || sg.Shard != shard {
			continue
		}
		for _, tp := range sg.TablePKs {
			if tp.TableName != table || tp.Lastpk == nil || len(tp.Lastpk.Fields) == 0 {
				continue
			}
			row, ok := keyRow(tp.Lastpk.Fields, key)
			if !ok {
				return nil, false
			}
			tp.Lastpk = &querypb.QueryResult{Fields: tp.Lastpk.Fields, Rows: []*querypb.Row{row}}
			return out, true
		}
	}
	return nil, false
}

// keyRow orders key's values as fields name them (the copy's key columns,
// in the order vtgate keeps them).
func keyRow(fields []*querypb.Field, key *event.CopyKey) (*querypb.Row, bool) {
	offsets := make([]int64, len(key.Fields))
	var off int64
	for i, n := range key.Values.Lengths {
		offsets[i] = off
		if n > 0 {
			off += n
		}
	}
	row := &querypb.Row{Lengths: make([]int64, 0, len(fields))}
	for _, f := range fields {
		i := -1
		for j, kf := range key.Fields {
			if kf.Name == f.Name {
				i = j
				break
			}
		}
		if i < 0 || i >= len(key.Values.Lengths) {
			return nil, false
		}
		n := key.Values.Lengths[i]
		if n < 0 {
			return nil, false // a key is never NULL
		}
		row.Lengths = append(row.Lengths, n)
		row.Values = append(row.Values, key.Values.Values[offsets[i]:offsets[i]+n]...)
	}
	return row, true
}
