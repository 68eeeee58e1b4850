package debezium

import (
	"encoding/json"
	"strings"
	"testing"
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
