package position_test

import (
	"bytes"
	"errors"
	"testing"

	"google.golang.org/protobuf/proto"
	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"
	querypb "vitess.io/vitess/go/vt/proto/query"

	"github.com/vstream-gateway/vstream-gateway/position"
)

// withPKs is a copy-phase entry carrying a real last-PK row, the largest
// thing a position holds.
func withPKs(shard string) position.Shard {
	s := at(shard, maria("0-1-5"))
	s.TablePKs = []*binlogdatapb.TableLastPK{{
		TableName: "corder",
		Lastpk: &querypb.QueryResult{
			Fields: []*querypb.Field{{Name: "order_id", Type: querypb.Type_INT64}},
			Rows:   []*querypb.Row{{Lengths: []int64{3}, Values: []byte("123")}},
		},
	}}
	return s
}

func TestMarshalRoundTrip(t *testing.T) {
	p := position.New
	for _, tc := range []struct {
		name string
		pos  position.Position
	}{
		{"mariadb", p(at("-80", maria("0-1-5")), at("80-", maria("0-2-7")))},
		{"mariadb multi-domain", p(at("0", maria("0-1-5,1-2-7,2-3-9")))},
		{"mysql with gaps", p(at("0", my56(uuidA+":1-5:7-10,"+uuidB+":1-3")))},
		{"copy phase", p(withPKs("-80"), at("80-", ""))},
		{"start now", startNow},
		{"start with a snapshot", startSnapshot},
		{"two keyspaces", p(at("-80", maria("0-1-5")), position.Shard{Keyspace: "commerce", Shard: "0", GTID: maria("0-9-1")})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := tc.pos.Marshal()
			if err != nil || len(b) == 0 {
				t.Fatalf("Marshal(%v) = %d bytes, %v", tc.pos, len(b), err)
			}
			got, err := position.Unmarshal(b)
			if err != nil {
				t.Fatal(err)
			}
			if !got.Identical(tc.pos) {
				t.Fatalf("round trip: %v, want %v", got, tc.pos)
			}
			// Stable: the decoded position encodes to the same bytes, and so
			// does the same position built again (another replica).
			again, _ := got.Marshal()
			rebuilt, _ := tc.pos.Clone().Marshal()
			if !bytes.Equal(again, b) || !bytes.Equal(rebuilt, b) {
				t.Fatalf("encoding not stable: %x, %x, %x", b, again, rebuilt)
			}
			// It is a plain protobuf VGtid: other Vitess clients read it.
			v := &binlogdatapb.VGtid{}
			if err := proto.Unmarshal(b, v); err != nil || !proto.Equal(v, tc.pos.VGtid()) {
				t.Fatalf("not a VGtid: %v, %v", v, err)
			}
		})
	}
}

// Different positions never share an encoding: the bytes are hashed into
// webhook message ids and cursor references.
func TestMarshalDistinct(t *testing.T) {
	p := position.New
	seen := map[string]string{}
	for _, pos := range []position.Position{
		p(at("-80", maria("0-1-5"))),
		p(at("-80", maria("0-1-6"))),
		p(at("80-", maria("0-1-5"))),
		p(position.Shard{Keyspace: "commerce", Shard: "-80", GTID: maria("0-1-5")}),
		p(withPKs("-80")),
		p(at("-80", maria("0-1-5")), at("80-", maria("0-2-7"))),
		p(at("80-", maria("0-2-7")), at("-80", maria("0-1-5"))),
	} {
		b, err := pos.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if prev, ok := seen[string(b)]; ok {
			t.Errorf("%v and %v encode alike", prev, pos)
		}
		seen[string(b)] = pos.String()
	}
}

func TestMarshalEmpty(t *testing.T) {
	for _, pos := range []position.Position{{}, position.Of(&binlogdatapb.VGtid{})} {
		if b, err := pos.Marshal(); b != nil || err != nil {
			t.Errorf("Marshal(%v) = %x, %v; want no bytes", pos, b, err)
		}
	}
	got, err := position.Unmarshal(nil)
	if err != nil || !got.IsZero() {
		t.Errorf("Unmarshal(nil) = %v, %v", got, err)
	}
}

func TestUnmarshalCorrupt(t *testing.T) {
	_, err := position.Unmarshal([]byte{0xff, 0xff, 0xff})
	var pe *position.Error
	if !errors.Is(err, position.ErrCorrupt) || !errors.As(err, &pe) || pe.Err == nil {
		t.Fatalf("Unmarshal(garbage) error %v; want an *Error of kind ErrCorrupt with its cause", err)
	}
}

func TestMarshalInvalidUTF8(t *testing.T) {
	// proto3 strings must be UTF-8; the failure is reported, not hidden.
	_, err := position.New(at("-80", "MariaDB/\xff")).Marshal()
	if !errors.Is(err, position.ErrCorrupt) {
		t.Fatalf("Marshal with a non-UTF-8 GTID: %v", err)
	}
}
