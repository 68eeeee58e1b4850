package client

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// pollSlack is how much longer than its wait a long-poll may take before
// it counts as lost.
const pollSlack = 30 * time.Second

// page is one answer of /changes.
type page struct {
	Events     []wireEvent `json:"events"`
	NextCursor string      `json:"next_cursor"`
	UpToDate   bool        `json:"up_to_date"`
}

// errNoPosition: a reader starting at "now" asked before vtgate told the
// gateway where that is (a 200 without a cursor); ask again later.
var errNoPosition = errors.New("the gateway does not know the stream's position yet")

// poll long-polls /changes until a request fails, and says why. Each
// request presents the last next_cursor (for a named subscriber with
// subscriber= too, so that it finds the subscription it parked and its
// bridge spools). The first asks without waiting, so that Dial learns at
// once that the stream can be read.
//
// With untilCursor it returns nil as soon as the client has a cursor
// outside a transaction: what a WebSocket or SSE client without one asks
// first. Those transports send no cursor before the first transaction or
// heartbeat, and a connection that broke before either would be opened
// again where the stream starts then ("now" has moved on, a snapshot
// starts over, a subscriber's stored cursor is behind what was received).
//
// Each request after the first passes back the page's Vsg-Scope and
// Vsg-Interval as scope= and interval=, the URL a cache in front of the
// gateway keeps pages under (DESIGN §6.2); a new token may have another
// scope, so the scope is learnt again after a refresh.
func (c *Client) poll(ctx context.Context, tok string, untilCursor bool) error {
	var asm assembler
	cursor := c.resume
	var scope, interval string
	for first := true; ; first = false {
		q := c.startQuery()
		if cursor != "" {
			q.Set("cursor", cursor)
			q.Del("start")
		}
		wait := c.o.pollWait
		if first || untilCursor {
			wait = 0
		}
		q.Set("wait", wait.String())
		q.Set("limit", strconv.Itoa(c.o.pollLimit))
		if scope != "" {
			q.Set("scope", scope)
		}
		if interval != "" {
			q.Set("interval", interval)
		}
		p, h, err := c.fetchPage(ctx, tok, q, wait+pollSlack)
		if err != nil {
			return err
		}
		scope, interval = validScope(h.Get("Vsg-Scope")), validInterval(h.Get("Vsg-Interval"))
		if !untilCursor {
			c.opened()
		}
		if err := c.pollPage(ctx, &asm, p); err != nil {
			return err
		}
		if p.NextCursor != "" {
			cursor = p.NextCursor
		}
		if untilCursor && c.resume != "" && !asm.pending() {
			return nil
		}
		if untilCursor && cursor == "" {
			return errNoPosition
		}
		// A token about to expire is replaced between requests.
		next, err := c.tokens.get(ctx, false)
		if err != nil {
			return err
		}
		if next != tok {
			scope = ""
		}
		tok = next
	}
}

// validScope and validInterval keep what a gateway (or something posing
// as one) sends back only in the form the gateway makes: a refusal of a
// mangled parameter would end the poll.
func validScope(s string) string {
	if len(s) != 16 || strings.Trim(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") != "" {
		return ""
	}
	return s
}

func validInterval(s string) string {
	if n, err := strconv.ParseInt(s, 10, 64); err != nil || n < 0 {
		return ""
	}
	return s
}

func (c *Client) fetchPage(ctx context.Context, tok string, q url.Values, timeout time.Duration) (*page, http.Header, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.endpoint("changes", q), nil)
	if err != nil {
		return nil, nil, err
	}
	c.authorize(req.Header, tok)
	resp, err := c.o.http.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, nil, readError(resp)
	}
	c.body.Reset()
	if _, err := c.body.ReadFrom(resp.Body); err != nil {
		return nil, nil, err
	}
	p, err := c.dec.page(c.body.Bytes())
	return p, resp.Header, err
}

// pollPage delivers a page's whole transactions. A transaction ends where
// the cursor changes, and at the page's end unless next_cursor lies
// inside it (a huge transaction cut at limit, continued by the next
// page). A page without events may still move the position (rows the
// filters or the token's scope withheld).
func (c *Client) pollPage(ctx context.Context, asm *assembler, p *page) error {
	for i := range p.Events {
		w := &p.Events[i]
		last := i+1 == len(p.Events)
		ends := !inside(w.Cursor) && (last && !inside(p.NextCursor) || !last && p.Events[i+1].Cursor != w.Cursor)
		t, err := asm.add(w, ends, w.Cursor)
		if err != nil {
			return err
		}
		if t != nil {
			if err := c.deliver(ctx, t); err != nil {
				return err
			}
		}
	}
	if !asm.pending() {
		return c.moveTo(ctx, p.NextCursor)
	}
	return nil
}
