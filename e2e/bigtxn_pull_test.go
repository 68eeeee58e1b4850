package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"
)

// pullPage is one pull response, reduced to what the test checks.
type pullPage struct {
	ids    []int64
	events int
	next   string
}

func pullOnce(ctx context.Context, g *gateway, stream, cursor string, limit int) (pullPage, error) {
	q := url.Values{"wait": {"2s"}, "limit": {fmt.Sprint(limit)}}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	var out struct {
		Events     []json.RawMessage `json:"events"`
		NextCursor string            `json:"next_cursor"`
	}
	status, err := g.do(ctx, "GET", "/v1/streams/"+stream+"/changes?"+q.Encode(), nil, &out)
	if err != nil {
		return pullPage{}, err
	}
	if status != http.StatusOK {
		return pullPage{}, fmt.Errorf("pull: status %d", status)
	}
	p := pullPage{events: len(out.Events), next: out.NextCursor}
	for _, raw := range out.Events {
		e, err := parseBig(raw)
		if err != nil {
			return pullPage{}, err
		}
		if id, ok := e.id(); ok {
			p.ids = append(p.ids, id)
		}
	}
	return p, nil
}

// TestHugeTransactionPullPages: a transaction of 3,000 rows of 4,000 bytes
// (12 MiB, delivered in pieces past the default 1 MiB chunk size) read by
// pull pages of limit=100: no page holds more than 100 events, pages end
// inside the transaction with a cursor that resumes exactly there (version
// 2), every row comes once and in order — also when a page is asked for
// again with the same cursor after the parked subscription moved on (a
// fresh subscription reads the transaction again from vtgate and skips
// what the cursor says was delivered).
func TestHugeTransactionPullPages(t *testing.T) {
	needE2E(t)
	const n, limit = 3000, 100
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	db, err := cluster.OpenDB("commerce")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range []string{"drop table if exists bigpull", "create table bigpull (id bigint not null primary key, pad mediumtext) engine=innodb"} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	g := startGateway(t, withDataDir(t)...)
	stream := uniqueName("bigpull")
	g.createStream(t, map[string]any{"name": stream, "keyspace": "commerce", "tables": []string{"bigpull"}})
	var cursor string
	if err := eventuallyCtx(ctx, time.Minute, "a first cursor", func() error {
		p, err := pullOnce(ctx, g, stream, "", limit)
		cursor = p.next
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, fmt.Sprintf("insert into bigpull (id, pad) select seq, repeat('x', %d) from seq_1_to_%d", bigPad, n)); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, fmt.Sprintf("insert into bigpull (id, pad) values (%d, 'last')", n+1)); err != nil {
		t.Fatal(err)
	}

	var got []int64
	pages, inside, asked := 0, 0, false
	for len(got) == 0 || got[len(got)-1] < n+1 {
		if ctx.Err() != nil {
			t.Fatalf("after %d pages: %d rows, the last %v", pages, len(got), got[max(0, len(got)-3):])
		}
		p, err := pullOnce(ctx, g, stream, cursor, limit)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		if p.events > limit {
			t.Fatalf("page %d holds %d events, limit %d", pages, p.events, limit)
		}
		if p.next != "" && p.next[0] == '2' {
			inside++
			if !asked && inside == 5 {
				// Ask for the next page twice: the second request finds
				// no parked subscription (the first took it on).
				asked = true
				again, err := pullOnce(ctx, g, stream, p.next, limit)
				if err != nil {
					t.Fatal(err)
				}
				p2, err := pullOnce(ctx, g, stream, p.next, limit)
				if err != nil {
					t.Fatal(err)
				}
				if len(again.ids) == 0 || len(p2.ids) == 0 || again.ids[0] != p2.ids[0] {
					t.Fatalf("the page after a cursor inside the transaction: from the parked subscription %v…, from a fresh one %v…",
						again.ids[:min(3, len(again.ids))], p2.ids[:min(3, len(p2.ids))])
				}
			}
		}
		got = append(got, p.ids...)
		cursor = p.next
	}
	for i, id := range got {
		if id != int64(i+1) {
			t.Fatalf("row %d is id %d, want %d (every row once, in order)", i, id, i+1)
		}
	}
	if inside == 0 {
		t.Fatal("no page ended inside the transaction")
	}
	t.Logf("RESULT pull of a %d-row transaction (%.1f MiB) with limit=%d: %d pages, %d of them ending inside it; every row once",
		n, float64(n*bigPad)/(1<<20), limit, pages, inside)
}
