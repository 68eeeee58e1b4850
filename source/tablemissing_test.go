package source_test

import (
	"errors"
	"strings"
	"testing"

	"vitess.io/vitess/go/sqltypes"
	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"
	vtrpcpb "vitess.io/vitess/go/vt/proto/vtrpc"
	"vitess.io/vitess/go/vt/vterrors"

	"github.com/vstream-gateway/vstream-gateway/internal/fakevtgate"
	"github.com/vstream-gateway/vstream-gateway/source"
)

// unknownTable is vtgate v0.24.4 passing on vttablet's refusal of a
// position before a DROP of a table of the filter, as measured on the
// local cluster after a MoveTables complete (TestMoveTablesDropped logs
// it; vstreamer.go buildTableColumns, wrapped by buildTablePlan).
func unknownTable(table string) error {
	return vterrors.New(vtrpcpb.Code_UNKNOWN, "error starting stream from shard GTID keyspace:\"customer\" shard:\"0\" gtid:\"MariaDB/0-368028906-270\": "+
		"persistent error in vstream for customer/0 on tablet zone1-0000000200; giving up: target: customer.0.primary: vttablet: rpc error: code = Unknown desc = "+
		"stream (at source tablet) error @ (including the GTID we failed to process) 0-368028906-271: unknown table "+table+" in schema\n"+
		"failed to build table replication plan for table "+table+"\n")
}

const showT = "show tables like 't'"

func tables(names ...string) *sqltypes.Result {
	return sqltypes.MakeTestResult(sqltypes.MakeTestFields("Tables_in_customer", "varchar"), names...)
}

// vttablet refusing a table of the filter is final only when vtgate
// confirms the table gone from the keyspace (DESIGN §4.1 rule 9): then the
// reader ends with a *TableMissingError, at once; while the table is there
// (or the question fails) the refusal is a schema lookup failing in
// vttablet, retried like an outage.
func TestTableMissing(t *testing.T) {
	t.Run("gone", func(t *testing.T) {
		fake, c := setup(t)
		fake.SetResult(showT, tables())
		fake.Push(fakevtgate.Script{Err: unknownTable("t")})
		r := open(t, c, pos(10))
		_, err := nextErr(r)
		var tm *source.TableMissingError
		if !errors.As(err, &tm) || tm.Table != "t" || tm.Keyspace != ks {
			t.Fatalf("Next: %v, want a TableMissingError for %s.t", err, ks)
		}
		if tm.Unwrap() == nil || !strings.Contains(tm.Unwrap().Error(), "unknown table t in schema") {
			t.Errorf("Unwrap: %v, want vtgate's refusal", tm.Unwrap())
		}
		if n := fake.Calls(); n != 1 {
			t.Errorf("%d VStream calls, want 1 (no retry)", n)
		}
		q := fake.Queries()
		if len(q) == 0 || q[len(q)-1].SQL != showT || q[len(q)-1].Target != ks+"@primary" {
			t.Errorf("queries %+v, want %q on %s@primary", q, showT, ks)
		}
	})
	for _, tc := range []struct {
		name string
		set  func(*fakevtgate.Server)
	}{
		{"still there", func(f *fakevtgate.Server) { f.SetResult(showT, tables("t")) }},
		{"check failed", func(f *fakevtgate.Server) {
			f.SetError(showT, vterrors.Errorf(vtrpcpb.Code_UNAVAILABLE, "no healthy tablet"))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake, c := setup(t)
			tc.set(fake)
			fake.Push(fakevtgate.Script{Err: unknownTable("t")},
				fakevtgate.Script{Open: true, Batches: [][]*binlogdatapb.VEvent{
					s0.Txn(100, pos(11), tField, s0.Insert("t", 100, []string{"1", "x"})),
				}})
			r := open(t, c, pos(10))
			txn := next(t, r)
			samePos(t, "after the retry", txn.VGtid, pos(11))
			samePos(t, "the retry's request", fake.Call(t, 1).Req.Vgtid, pos(10))
		})
	}
	t.Run("like literal", func(t *testing.T) {
		fake, c := setup(t)
		fake.SetResult(`show tables like 'a\\_b'`, tables())
		fake.Push(fakevtgate.Script{Err: unknownTable("a_b")})
		_, err := nextErr(open(t, c, pos(10)))
		var tm *source.TableMissingError
		if !errors.As(err, &tm) || tm.Table != "a_b" {
			t.Fatalf("Next: %v, want a TableMissingError for a_b (the LIKE escapes _)", err)
		}
	})
}

func TestUnknownTable(t *testing.T) {
	if table, ok := source.UnknownTable(unknownTable("customer")); !ok || table != "customer" {
		t.Errorf("UnknownTable = %q, %v; want customer", table, ok)
	}
	if _, ok := source.UnknownTable(errors.New("column doc not found in table t")); ok {
		t.Error("UnknownTable matched another refusal")
	}
}
