package handlers

import (
	"bufio"
	"bytes"
	"strings"
	"testing"

	"github.com/vstream-gateway/vstream-gateway/event"
	"github.com/vstream-gateway/vstream-gateway/hub"
	"github.com/vstream-gateway/vstream-gateway/internal/wsconn"
	"github.com/vstream-gateway/vstream-gateway/source"
)

// pieces are a chunked transaction as the hub delivers it (DESIGN §3.1):
// two Partial pieces without cursor, then the last with the cursor after it.
func pieces() []*hub.Delivery {
	ev := func(i string) event.Event {
		return event.Event{Type: event.TypeChange, JSON: []byte(`{"type":"change","after":{"id":` + i + `}`)}
	}
	return []*hub.Delivery{
		{Txn: &source.Txn{Events: []event.Event{ev("1"), ev("2")}, Partial: true}},
		{Txn: &source.Txn{Events: []event.Event{ev("3")}, Partial: true, Continued: true}},
		{Txn: &source.Txn{Events: []event.Event{ev("4")}, Continued: true}, Cursor: "c9"},
	}
}

// On WebSocket the pieces of a chunked transaction go out as they come,
// without cursor or txn_end until the last event, in both modes.
func TestWriteTxnPieces(t *testing.T) {
	const (
		e1 = `{"type":"change","after":{"id":1}}`
		e2 = `{"type":"change","after":{"id":2}}`
		e3 = `{"type":"change","after":{"id":3}}`
		e4 = `{"type":"change","after":{"id":4},"cursor":"c9","txn_end":true}`
	)
	for _, tc := range []struct {
		batch bool
		want  []string
	}{
		{false, []string{e1, e2, e3, e4}},
		{true, []string{"[" + e1 + "," + e2 + "]", "[" + e3 + "]", "[" + e4 + "]"}},
	} {
		rec := &recordConn{}
		conn := wsconn.New(rec)
		var buf []byte
		for _, d := range pieces() {
			var err error
			if buf, err = writeTxn(conn, d, tc.batch, buf); err != nil {
				t.Fatal(err)
			}
		}
		conn.Flush()
		if got := frames(t, rec); strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
			t.Errorf("batch=%t:\n got %q\nwant %q", tc.batch, got, tc.want)
		}
	}
}

// On SSE the pieces have no id: (a browser reconnecting inside the
// transaction resumes before it) until the last event.
func TestSSEPieces(t *testing.T) {
	var out bytes.Buffer
	bw := bufio.NewWriter(&out)
	s := &sseSink{w: bw, flush: bw.Flush}
	for _, d := range pieces() {
		if err := s.deliver(d, false); err != nil {
			t.Fatal(err)
		}
	}
	want := "event: change\ndata: {\"type\":\"change\",\"after\":{\"id\":1}}\n\n" +
		"event: change\ndata: {\"type\":\"change\",\"after\":{\"id\":2}}\n\n" +
		"event: change\ndata: {\"type\":\"change\",\"after\":{\"id\":3}}\n\n" +
		"id: c9\nevent: change\ndata: {\"type\":\"change\",\"after\":{\"id\":4},\"cursor\":\"c9\"}\n\n"
	if out.String() != want {
		t.Fatalf("SSE:\n%s\nwant\n%s", out.String(), want)
	}
}
