package handlers

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/vstream-gateway/vstream-gateway/event"
	"github.com/vstream-gateway/vstream-gateway/hub"
	"github.com/vstream-gateway/vstream-gateway/internal/wsconn"
	"github.com/vstream-gateway/vstream-gateway/source"
)

// recordConn records the writes that reach the network.
type recordConn struct {
	net.Conn
	mu     sync.Mutex
	writes [][]byte
}

func (r *recordConn) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.writes = append(r.writes, bytes.Clone(p))
	return len(p), nil
}

// frames splits what a wsconn.Conn sent into its messages' payloads.
func frames(t *testing.T, rec *recordConn) []string {
	t.Helper()
	var b []byte
	for _, w := range rec.writes {
		b = append(b, w...)
	}
	var out []string
	for len(b) > 0 {
		if b[0] != 0x81 {
			t.Fatalf("not a final text frame: %x", b[0])
		}
		n, h := int(b[1]), 2
		switch n {
		case 126:
			n, h = int(binary.BigEndian.Uint16(b[2:])), 4
		case 127:
			n, h = int(binary.BigEndian.Uint64(b[2:])), 10
		}
		out = append(out, string(b[h:h+n]))
		b = b[h+n:]
	}
	return out
}

// writeTxn marks the end of a transaction on its last event, one message
// per event or one array per transaction (with the cursor once).
func TestWriteTxn(t *testing.T) {
	ev := func(i string) event.Event {
		return event.Event{Type: event.TypeChange, JSON: []byte(`{"type":"change","after":{"id":` + i + `}`)}
	}
	d := &hub.Delivery{Txn: &source.Txn{Events: []event.Event{ev("1"), ev("2"), ev("3")}}, Cursor: "c9"}
	const (
		e1 = `{"type":"change","after":{"id":1},"cursor":"c9"}`
		e2 = `{"type":"change","after":{"id":2},"cursor":"c9"}`
		e3 = `{"type":"change","after":{"id":3},"cursor":"c9","txn_end":true}`
	)
	for _, tc := range []struct {
		batch bool
		want  []string
	}{
		{false, []string{e1, e2, e3}},
		// In an array the cursor is on the message's last event only.
		{true, []string{"[" + strings.Replace(e1, `,"cursor":"c9"`, "", 1) + "," + strings.Replace(e2, `,"cursor":"c9"`, "", 1) + "," + e3 + "]"}},
	} {
		rec := &recordConn{}
		conn := wsconn.New(rec)
		buf, err := writeTxn(conn, d, tc.batch, nil)
		if err != nil {
			t.Fatal(err)
		}
		// A one-event transaction, reusing the buffer.
		one := &hub.Delivery{Txn: &source.Txn{Events: d.Events[2:]}, Cursor: "c9"}
		if _, err := writeTxn(conn, one, tc.batch, buf); err != nil {
			t.Fatal(err)
		}
		conn.Flush()
		want := append(tc.want, e3)
		if tc.batch {
			want[len(want)-1] = "[" + e3 + "]"
		}
		got := frames(t, rec)
		if len(got) != len(want) {
			t.Fatalf("batch=%t: %d messages %q, want %q", tc.batch, len(got), got, want)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("batch=%t message %d:\n got %s\nwant %s", tc.batch, i, got[i], want[i])
			}
		}
	}
}

// A batched transaction past batchMessageBytes goes out as several arrays:
// every event once and in order, no message past the bound (but for the
// cursor and brackets), the cursor on each message's last event only, and
// "txn_end" only on the transaction's last event (on none for a piece of
// a chunked transaction).
func TestWriteTxnBatchSplits(t *testing.T) {
	const n = 3000
	evs := make([]event.Event, n)
	for i := range evs {
		evs[i] = event.Event{Type: event.TypeChange,
			JSON: []byte(fmt.Sprintf(`{"type":"change","after":{"id":%d,"note":%q}`, i, strings.Repeat("x", i%200)))}
	}
	for _, partial := range []bool{false, true} {
		rec := &recordConn{}
		conn := wsconn.New(rec)
		d := &hub.Delivery{Txn: &source.Txn{Events: evs, Partial: partial}, Cursor: "c9"}
		if _, err := writeTxn(conn, d, true, nil); err != nil {
			t.Fatal(err)
		}
		conn.Flush()
		msgs := frames(t, rec)
		if len(msgs) < 3 {
			t.Fatalf("partial=%t: %d messages for %d events, want several", partial, len(msgs), n)
		}
		next := 0
		for k, m := range msgs {
			if len(m) > batchMessageBytes+len(`,"cursor":"c9","txn_end":true`) {
				t.Errorf("partial=%t: message %d has %d bytes", partial, k, len(m))
			}
			var got []struct {
				After struct {
					ID int `json:"id"`
				} `json:"after"`
				Cursor string `json:"cursor"`
				TxnEnd bool   `json:"txn_end"`
			}
			if err := json.Unmarshal([]byte(m), &got); err != nil || len(got) == 0 {
				t.Fatalf("partial=%t: message %d is not a JSON array of events: %v", partial, k, err)
			}
			for j, e := range got {
				if e.After.ID != next {
					t.Fatalf("partial=%t: event %+v where event %d was due", partial, e, next)
				}
				if want := map[bool]string{true: "c9"}[j == len(got)-1]; e.Cursor != want {
					t.Errorf("partial=%t: event %d (%d of message %d) has cursor %q, want %q", partial, next, j, k, e.Cursor, want)
				}
				if want := next == n-1 && !partial; e.TxnEnd != want {
					t.Errorf("partial=%t: event %d txn_end=%t", partial, next, e.TxnEnd)
				}
				next++
			}
		}
		if next != n {
			t.Errorf("partial=%t: %d events arrived, want %d", partial, next, n)
		}
	}
}

// A transaction the token's table scope emptied sends nothing, in either
// mode.
func TestWriteTxnEmpty(t *testing.T) {
	for _, batch := range []bool{false, true} {
		rec := &recordConn{}
		conn := wsconn.New(rec)
		d := &hub.Delivery{Txn: &source.Txn{}, Cursor: "c9"}
		if _, err := writeTxn(conn, d, batch, nil); err != nil {
			t.Fatal(err)
		}
		conn.Flush()
		if len(rec.writes) != 0 {
			t.Errorf("batch=%t: sent %q for an empty transaction", batch, rec.writes)
		}
	}
}
