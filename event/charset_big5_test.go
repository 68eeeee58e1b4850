package event

import (
	"strings"
	"testing"

	querypb "vitess.io/vitess/go/vt/proto/query"
)

// Big5 text is decoded, not replaced: collation 1 is big5_chinese_ci, 84
// big5_bin.
func TestBig5(t *testing.T) {
	cases := []struct {
		collation uint32
		in, want  string
	}{
		{1, "\xa4\xa4\xa4\xe5", `"中文"`},
		{84, "\xa4\xa4\xa4\xe5", `"中文"`},
		{1, "\xa7\x41\xa6\x6e, world", `"你好, world"`},
		{1, "\xa1\x40\xa1\x41", `"　，"`},     // full-width space and comma
		{1, "\xa4\"\\\n", `"\ufffd\"\\\n"`}, // a lead byte before ASCII: U+FFFD, ASCII kept and escaped
		{1, "ok\xa4", `"ok\ufffd"`},         // truncated character
		{1, "\xff", `"\ufffd"`},             // not a Big5 byte
		{1, "", `""`},
	}
	for _, c := range cases {
		f := fld("s", querypb.Type_VARCHAR, 0, 40, 0, c.collation, "")
		if got := encodeValue(t, f, Options{}, []byte(c.in), false); got != c.want {
			t.Errorf("collation %d %q: got %s, want %s", c.collation, c.in, got, c.want)
		}
	}

	// A value longer than the scratch buffer, and the same codec again
	// (the buffer comes back from the pool).
	long := strings.Repeat("\xa4\xa4\xa4\xe5", 5000)
	want := `"` + strings.Repeat("中文", 5000) + `"`
	f := fld("s", querypb.Type_TEXT, 0, 65535, 0, 1, "")
	for range 2 {
		if got := encodeValue(t, f, Options{}, []byte(long), false); got != want {
			t.Fatalf("long value: got %d bytes, want %d", len(got), len(want))
		}
	}

	// SET and ENUM members are text of the column's character set.
	set := fld("s", querypb.Type_SET, 0, 10, 0, 1, "set('中','文')")
	if got := encodeValue(t, set, Options{}, []byte("\xa4\xa4,\xa4\xe5"), false); got != `["中","文"]` {
		t.Errorf("set: %s", got)
	}
}
