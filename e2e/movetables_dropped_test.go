package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// TestMoveTablesDropped: a gateway without --vtctld cannot see a
// MoveTables cutover (DESIGN §4.1 rule 9); after `complete` drops the
// tables at the source, a stream with on_gap resync tells its online
// reader with a `resync` (reason tables_dropped) after every row written
// before the move; a stream with on_gap fail ends its online readers (a
// WebSocket, a poller) with tables_dropped after every row written before
// the move, and answers a cursor from before the move, read after
// complete by a restarted gateway, with 409 tables_dropped. The tables
// are moved home afterwards, even on failure. (≈ 20–40 s with the trip
// home.)
func TestMoveTablesDropped(t *testing.T) {
	needE2E(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	tablesAtHome(t, ctx)
	suffix := strconv.FormatInt(time.Now().UnixNano()%1e6, 10)
	wf := "d" + suffix
	// Whatever happens, the tables end at home: a workflow not switched
	// is cancelled, a switched one completed and moved back (this test
	// always moves them back: it completes the move).
	var created, switched bool
	t.Cleanup(func() {
		switch {
		case switched:
			sendHome(t, wf)
		case created:
			cctx, ccancel := context.WithTimeout(context.Background(), time.Minute)
			defer ccancel()
			if err := cluster.Cancel(cctx, otherKeyspace, wf); err != nil {
				t.Logf("putting the tables home: cancel %s: %v", wf, err)
			}
		}
	})
	g := startGateway(t, withRedis(t)...) // no --vtctld
	stream, failStream := "mtd-"+suffix, "mtdf-"+suffix
	g.createStream(t, map[string]any{"name": stream, "keyspace": homeKeyspace, "tables": []string{"customer"}})
	g.createStream(t, map[string]any{"name": failStream, "keyspace": homeKeyspace, "tables": []string{"customer"}, "on_gap": "fail"})
	cur := initialCursor(t, ctx, g, stream)
	failCur := initialCursor(t, ctx, g, failStream)
	c, err := connectWS(ctx, g, stream, "", cur)
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	p := pump(ctx, c)
	defer p.stop()
	// The on_gap fail stream's online readers: a WebSocket and a poller.
	fc, err := connectWS(ctx, g, failStream, "", failCur)
	if err != nil {
		t.Fatal(err)
	}
	defer fc.close()
	fp := pump(ctx, fc)
	defer fp.stop()
	pctx, pcancel := context.WithCancel(ctx)
	defer pcancel()
	polled := make(chan pollEnd, 1)
	go func() { polled <- pollUntilError(pctx, g, failStream, failCur, "mtd"+suffix) }()

	// Rows before the move only: without --vtctld the source's reverse
	// copies after SwitchTraffic are not told apart (the documented
	// limit), so nothing is written from the switch on.
	db := globalDB(t)
	var want []string
	for i := range 20 {
		email := fmt.Sprintf("mtd%s-%03d@e2e", suffix, i)
		if _, err := db.ExecContext(ctx, "insert into customer(email) values (?)", email); err != nil {
			t.Fatal(err)
		}
		want = append(want, email)
	}
	created = true
	if err := cluster.MoveTables(ctx, otherKeyspace, wf, homeKeyspace, "customer,corder"); err != nil {
		t.Fatalf("MoveTables create: %v", err)
	}
	switched = true
	if err := cluster.SwitchTraffic(ctx, otherKeyspace, wf); err != nil {
		t.Fatalf("SwitchTraffic: %v", err)
	}
	completeAt := time.Now()
	if err := cluster.Complete(ctx, otherKeyspace, wf); err != nil {
		t.Fatalf("complete: %v", err)
	}

	// The online reader: every row once, then the resync.
	r := p.reader()
	seen := map[string]int{}
	rctx, rcancel := context.WithTimeout(ctx, 2*time.Minute)
	defer rcancel()
	var resync ev
	for resync.Type == "" {
		e, err := r.next(rctx)
		if err != nil {
			t.Fatalf("reading until the resync (rows seen %d of %d): %v", len(seen), len(want), err)
		}
		switch e.Type {
		case "resync":
			resync = e
		case "moved":
			t.Errorf("a moved event without --vtctld: %s", e.Raw)
		default:
			if e.Table == "customer" {
				var email string
				if json.Unmarshal(e.After["email"], &email) == nil && strings.HasPrefix(email, "mtd"+suffix) {
					seen[email]++
				}
			}
		}
	}
	t.Logf("resync %s after complete: %s", time.Since(completeAt).Round(time.Millisecond), resync.Raw)
	var body struct {
		Reason string   `json:"reason"`
		Tables []string `json:"tables"`
	}
	if err := json.Unmarshal(resync.Raw, &body); err != nil || body.Reason != "tables_dropped" || len(body.Tables) != 1 || body.Tables[0] != "customer" {
		t.Errorf("resync %s: want reason tables_dropped, tables [customer] (%v)", resync.Raw, err)
	}
	for _, email := range want {
		if seen[email] != 1 {
			t.Errorf("row %s delivered %d times, want once", email, seen[email])
		}
	}

	// on_gap fail, online across complete: every row, then the end — the
	// WebSocket's disconnect message (reason tables_dropped) and close
	// 4011, the poller's 409 tables_dropped. Never silence.
	fr := fp.reader()
	fseen := map[string]int{}
	var disconnect ev
	for disconnect.Type == "" {
		e, err := fr.next(rctx)
		if err != nil {
			t.Fatalf("on_gap fail WebSocket: reading until the disconnect (rows seen %d of %d): %v", len(fseen), len(want), err)
		}
		switch e.Type {
		case "disconnect":
			disconnect = e
		case "change":
			if email := e.str("email"); strings.HasPrefix(email, "mtd"+suffix) {
				fseen[email]++
			}
		}
	}
	t.Logf("on_gap fail WebSocket: disconnect %s after complete: %s", time.Since(completeAt).Round(time.Millisecond), disconnect.Raw)
	var d struct {
		Code   int    `json:"code"`
		Reason string `json:"reason"`
		Cursor string `json:"cursor"`
	}
	if err := json.Unmarshal(disconnect.Raw, &d); err != nil || d.Code != 4011 || d.Reason != "tables_dropped" || d.Cursor == "" {
		t.Errorf("on_gap fail WebSocket: %s, want code 4011, reason tables_dropped and a cursor (%v)", disconnect.Raw, err)
	}
	if _, err := fr.next(rctx); websocket.CloseStatus(err) != 4011 {
		t.Errorf("on_gap fail WebSocket: closed with %v, want 4011", err)
	}
	var pe pollEnd
	select {
	case pe = <-polled:
	case <-rctx.Done():
		t.Fatal("on_gap fail poller: no end within 2 minutes of complete")
	}
	t.Logf("on_gap fail poller: %d %s after %d rows", pe.status, pe.code, len(pe.seen))
	if pe.err != nil || pe.status != http.StatusConflict || pe.code != "tables_dropped" {
		t.Errorf("on_gap fail poller ended with %d %s (%v), want 409 tables_dropped", pe.status, pe.code, pe.err)
	}
	for _, email := range want {
		if fseen[email] != 1 || pe.seen[email] != 1 {
			t.Errorf("on_gap fail: row %s delivered %d times on the WebSocket, %d times to the poller, want once each", email, fseen[email], pe.seen[email])
		}
	}

	// on_gap fail: a cursor from before the move, read after complete by
	// a gateway with no tail or ring of the stream (restarted): vttablet
	// refuses the VStream (the filter's table is gone from its schema),
	// which vtgate confirms: 409 tables_dropped, as online.
	g.restart(syscall.SIGTERM)
	q := url.Values{"cursor": {failCur}, "wait": {"2s"}, "limit": {"500"}}
	var out struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	st, err := g.do(ctx, "GET", "/v1/streams/"+failStream+"/changes?"+q.Encode(), nil, &out)
	if err != nil || st != http.StatusConflict || out.Error.Code != "tables_dropped" {
		t.Errorf("on_gap fail, cursor from before the move after complete: %d %v %+v, want 409 tables_dropped", st, err, out)
	} else {
		t.Logf("on_gap fail, cursor from before the move after a restart: %d %s: %s", st, out.Error.Code, out.Error.Message)
	}
	// vttablet's refusal as the gateway logged it (source.UnknownTable).
	for _, line := range strings.Split(g.log.String(), "\n") {
		if strings.Contains(line, "unknown table") {
			t.Logf("gateway log: %.1000s", line)
			break
		}
	}
}

// pollEnd is how a poller's reading of a stream ended.
type pollEnd struct {
	seen   map[string]int // rows by email, with the given prefix
	status int
	code   string
	err    error
}

// pollUntilError pages through stream from cursor until a page is not a
// 200, counting the rows whose email starts with prefix.
func pollUntilError(ctx context.Context, g *gateway, stream, cursor, prefix string) pollEnd {
	end := pollEnd{seen: map[string]int{}}
	for {
		q := url.Values{"cursor": {cursor}, "wait": {"2s"}, "limit": {"500"}}
		var out struct {
			Events     []json.RawMessage              `json:"events"`
			NextCursor string                         `json:"next_cursor"`
			Error      struct{ Code, Message string } `json:"error"`
		}
		st, err := g.do(ctx, "GET", "/v1/streams/"+stream+"/changes?"+q.Encode(), nil, &out)
		if err != nil || st != http.StatusOK {
			end.status, end.code, end.err = st, out.Error.Code, err
			return end
		}
		for _, raw := range out.Events {
			e, err := parseEvent(raw)
			if err != nil {
				end.err = err
				return end
			}
			if email := e.str("email"); e.Type == "change" && strings.HasPrefix(email, prefix) {
				end.seen[email]++
			}
		}
		cursor = out.NextCursor
	}
}
