package auth

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/vstream-gateway/vstream-gateway/event"
)

func TestGlob(t *testing.T) {
	for _, c := range []struct {
		pattern, s string
		want       bool
	}{
		{"*", "", true},
		{"*", "customer.corder", true},
		{"orders", "orders", true},
		{"orders", "orders2", false},
		{"orders-*", "orders-eu", true},
		{"orders-*", "orders", false},
		{"*-eu", "orders-eu", true},
		{"o?ders", "orders", true},
		{"o?ders", "oders", false},
		{"a*b*c", "aXXbYYc", true},
		{"a*b*c", "aXXbYY", false},
		{"**", "x", true},
		{"", "", true},
		{"", "x", false},
	} {
		if got := matchGlob(c.pattern, c.s); got != c.want {
			t.Errorf("matchGlob(%q, %q) = %v", c.pattern, c.s, got)
		}
		ks, table, dotted := strings.Cut(c.s, ".")
		if dotted {
			if got := matchQualified(c.pattern, ks, table); got != c.want {
				t.Errorf("matchQualified(%q, %q, %q) = %v", c.pattern, ks, table, got)
			}
		}
	}
}

func FuzzGlob(f *testing.F) {
	f.Add("customer.*", "customer", "corder")
	f.Add("*.c?rder", "x", "corder")
	f.Fuzz(func(t *testing.T, pattern, ks, table string) {
		// The virtual concatenation must agree with the real one.
		if matchQualified(pattern, ks, table) != matchGlob(pattern, ks+"."+table) {
			t.Errorf("matchQualified(%q, %q, %q) disagrees", pattern, ks, table)
		}
	})
}

func row(ks, table string) event.Event {
	return event.Event{Type: event.TypeChange, Op: event.OpInsert, Keyspace: ks, Table: table, JSON: []byte(`{"type":"change"`)}
}

func TestTableFilter(t *testing.T) {
	ddl := event.Event{Type: event.TypeDDL, Keyspace: "customer", JSON: []byte(`{"type":"ddl"`)}
	reshard := event.Event{Type: event.TypeReshard, Keyspace: "customer", JSON: []byte(`{"type":"reshard"`)}
	txn := []event.Event{row("customer", "customer"), row("customer", "corder"), ddl, reshard, row("other", "corder")}
	for _, c := range []struct {
		globs []string
		want  string // tables (or types) kept, in order
	}{
		{[]string{"*"}, "customer.customer customer.corder ddl reshard other.corder"},
		{[]string{"*.*"}, "customer.customer customer.corder ddl reshard other.corder"},
		{[]string{"customer.*"}, "customer.customer customer.corder ddl reshard"},
		{[]string{"customer.customer"}, "customer.customer reshard"},
		{[]string{"*.corder"}, "customer.corder reshard other.corder"},
		{[]string{"customer.c*"}, "customer.customer customer.corder reshard"},
		{nil, "reshard"},
	} {
		f := NewTableFilter(c.globs)
		var got []string
		for _, e := range f.Filter(txn) {
			if e.Table != "" {
				got = append(got, e.Keyspace+"."+e.Table)
			} else {
				got = append(got, string(e.Type))
			}
		}
		if strings.Join(got, " ") != c.want {
			t.Errorf("%v: kept %v, want %s", c.globs, got, c.want)
		}
	}
	// Filtering never touches the shared transaction.
	NewTableFilter([]string{"customer.corder"}).Filter(txn)
	if txn[0].Table != "customer" || len(txn) != 5 {
		t.Error("Filter modified its input")
	}
	// Nothing removed: the same slice, no copy.
	all := txn[:2]
	if got := NewTableFilter([]string{"customer.*"}).Filter(all); &got[0] != &all[0] {
		t.Error("Filter copied a transaction it did not change")
	}
}

func TestSubscriberBinding(t *testing.T) {
	p := &Principal{Subject: "alice"}
	for name, want := range map[string]bool{
		"alice": true, "alice.mobile": true, "alice.": true,
		"alicex": false, "bob": false, "alice-2": false, "": false, "xalice": false,
	} {
		if got := p.MayUseSubscriber(name); got != want {
			t.Errorf("sub alice, subscriber %q: %v, want %v", name, got, want)
		}
	}
	admin := &Principal{Subject: "ops", Scopes: []string{"admin"}}
	if !admin.MayUseSubscriber("bob") {
		t.Error("admin may not use subscriber bob")
	}
	if admin.MayReadStream("orders") {
		t.Error("admin scope widened the streams claim")
	}
	if (&Principal{}).MayUseSubscriber("") {
		t.Error("empty subject matched the empty name")
	}
}

func TestTokenFromRequest(t *testing.T) {
	for _, c := range []struct {
		name, header, proto, query string
		tok, src, reason           string
	}{
		{name: "bearer header", header: "Bearer abc", tok: "abc", src: SourceHeader},
		{name: "lower-case scheme", header: "bearer abc", tok: "abc", src: SourceHeader},
		{name: "basic auth", header: "Basic dXNlcjpwYXNz", reason: ReasonMalformed},
		{name: "bearer without token", header: "Bearer ", reason: ReasonMalformed},
		{name: "subprotocol", proto: "vsg.v1, bearer.x.y.z", tok: "x.y.z", src: SourceSubprotocol},
		{name: "query", query: "access_token=q.r.s", tok: "q.r.s", src: SourceQuery},
		{name: "header wins", header: "Bearer h", query: "access_token=q", tok: "h", src: SourceHeader},
		{name: "nothing", reason: ReasonMissing},
		{name: "subprotocol without token", proto: "vsg.v1", reason: ReasonMissing},
	} {
		r := httptest.NewRequest("GET", "/v1/streams?"+c.query, nil)
		if c.header != "" {
			r.Header.Set("Authorization", c.header)
		}
		if c.proto != "" {
			r.Header.Set("Sec-WebSocket-Protocol", c.proto)
		}
		tok, src, err := TokenFromRequest(r)
		if c.reason != "" {
			if reason(err) != c.reason {
				t.Errorf("%s: %v, want reason %s", c.name, err, c.reason)
			}
			continue
		}
		if err != nil || tok != c.tok || src != c.src {
			t.Errorf("%s: %q %q %v", c.name, tok, src, err)
		}
	}
}

// BenchmarkFilter is the per-event cost of table scopes: one transaction
// of ten rows, half of them out of scope.
func BenchmarkFilter(b *testing.B) {
	txn := make([]event.Event, 10)
	for i := range txn {
		if i%2 == 0 {
			txn[i] = row("customer", "customer")
		} else {
			txn[i] = row("customer", "corder")
		}
	}
	for _, c := range []struct {
		name  string
		globs []string
	}{
		{"all", []string{"*"}},
		{"exact-keep-all", []string{"customer.customer", "customer.corder"}},
		{"exact-drop-half", []string{"customer.customer"}},
		{"glob-drop-half", []string{"other.*", "*.cust?mer"}},
	} {
		f := NewTableFilter(c.globs)
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				f.Filter(txn)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(txn)), "ns/event")
		})
	}
}
