package debezium

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"

	"github.com/vstream-gateway/vstream-gateway/event"
)

// skipString must find the end of every JSON string, short or long, with
// escapes anywhere, also where its byte-by-byte start hands over to
// IndexByte.
func TestSkipString(t *testing.T) {
	var cases []string
	for _, n := range []int{0, 1, 22, 23, 24, 25, 26, 60} {
		pad := strings.Repeat("a", n)
		for _, body := range []string{``, `\\`, `\"`, `\\\\`, `\\\"`, `x\"y\\`, `\u0022`} {
			cases = append(cases, pad+body, body+pad, pad+body+pad)
		}
	}
	for _, c := range cases {
		doc := `"` + c + `",1`
		if !json.Valid([]byte(doc[:len(doc)-2])) {
			t.Fatalf("bad case %q", c)
		}
		if got, want := skipString([]byte(doc), 0), len(c)+2; got != want {
			t.Errorf("skipString(%q) = %d, want %d", doc, got, want)
		}
	}
	for _, bad := range []string{`"abc`, `"` + strings.Repeat("a", 40) + `\"`, `"\`, `"` + strings.Repeat("b", 23) + `\`} {
		if got := skipString([]byte(bad), 0); got != -1 {
			t.Errorf("skipString(%q) = %d, want -1 (unterminated)", bad, got)
		}
	}
}

// keyAt finds the key member where the default format puts it, and where
// the names before it were escaped or the event's fields do not match its
// bytes, by searching: never a "key" column of an image.
func TestKeyAt(t *testing.T) {
	for _, c := range []struct {
		ev   event.Event
		want string // what follows the member
	}{
		{event.Event{Op: "insert", Keyspace: "ks", Shard: "-80", Table: "t",
			JSON: []byte(`{"type":"change","op":"insert","keyspace":"ks","shard":"-80","table":"t","key":{"id":1},"before":null,"after":{"id":1,"key":2}`)}, `{"id":1}`},
		// An escaped table name: the member is one byte further on.
		{event.Event{Op: "insert", Keyspace: "ks", Shard: "0", Table: `a"b`,
			JSON: []byte(`{"type":"change","op":"insert","keyspace":"ks","shard":"0","table":"a\"b","key":{"key":1},"before":null,"after":{"key":1}`)}, `{"key":1}`},
	} {
		k := keyAt(&c.ev)
		if k < 0 || !bytes.HasPrefix(c.ev.JSON[k:], []byte(`,"key":`+c.want)) {
			t.Errorf("%s: key member at %d", c.ev.JSON, k)
		}
	}
	// A Table field longer than the bytes' table puts the computed place
	// on a "key" column of the after image: the table check refuses it.
	j := `{"type":"change","op":"insert","keyspace":"ks","shard":"0","table":"t","key":null,"before":null,"after":{"a":1,"key":2}`
	at := strings.LastIndex(j, `,"key":`)
	ev := event.Event{Op: "insert", Keyspace: "ks", Shard: "0", Table: "t" + strings.Repeat("x", at-strings.Index(j, `,"key":`)), JSON: []byte(j)}
	if len(`{"type":"change","op":"","keyspace":"","shard":"","table":""`)+len("insert")+len("ks")+len("0")+len(ev.Table) != at {
		t.Fatal("the case does not aim where it should")
	}
	if k := keyAt(&ev); k != strings.Index(j, `,"key":`) {
		t.Errorf("key member at %d, want %d", k, strings.Index(j, `,"key":`))
	}
}

// vgtidString is the JSON string of the position's JSON document, as
// encoding/json writes both, for plain names and for names with quotes,
// backslashes, control and non-ASCII characters.
func TestVGtidString(t *testing.T) {
	for _, names := range [][3]string{
		{"customer", "-80", "MariaDB/0-1285670802-13286"},
		{`we"ird`, `a\b`, "MySQL56/1a2b:1-5\n"},
		{"ké", "80-", "\u2028\x01"},
	} {
		v := &binlogdatapb.VGtid{ShardGtids: []*binlogdatapb.ShardGtid{
			{Keyspace: names[0], Shard: names[1], Gtid: names[2]},
			{Keyspace: "customer", Shard: "80-", Gtid: "MariaDB/0-1-2"},
		}}
		type sg struct {
			Keyspace string `json:"keyspace"`
			Shard    string `json:"shard"`
			Gtid     string `json:"gtid"`
		}
		doc, _ := json.Marshal([]sg{{names[0], names[1], names[2]}, {"customer", "80-", "MariaDB/0-1-2"}})
		var got, want string
		if err := json.Unmarshal(vgtidString(nil, v), &got); err != nil {
			t.Fatalf("%q: %s is not a JSON string: %v", names, vgtidString(nil, v), err)
		}
		want = string(doc)
		var a, b []sg
		if json.Unmarshal([]byte(got), &a) != nil || json.Unmarshal([]byte(want), &b) != nil || len(a) != 2 || a[0] != b[0] || a[1] != b[1] {
			t.Errorf("%q: got %s, want %s", names, got, want)
		}
	}
}
