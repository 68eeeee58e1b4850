package e2e

import (
	"context"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// TestGatewayRestart stops the gateway between reads, gracefully (SIGTERM)
// and not (SIGKILL), with a named subscriber and an anonymous token, on
// both stores: no row is lost, and only what was not acknowledged comes
// again.
func TestGatewayRestart(t *testing.T) {
	needE2E(t)
	for _, tc := range []struct {
		name  string
		flags func(t *testing.T) []string
	}{
		{"redis", withRedis},
		{"embedded", withDataDir},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			g := startGateway(t, tc.flags(t)...)
			w := newWriter(t, "restart"+tc.name+strconv.FormatInt(time.Now().UnixNano()%1e6, 10))
			stream := "restart-" + tc.name + strconv.FormatInt(time.Now().UnixNano()%1e6, 10)
			g.createStream(t, map[string]any{"name": stream, "keyspace": "customer", "tables": []string{"customer"}})
			named := &offline{name: "named", stream: stream, sub: "restarter"}
			anon := &offline{name: "anonymous", stream: stream}
			for _, o := range []*offline{named, anon} {
				o.cursor = initialCursor(t, ctx, g, stream)
				if o.sub != "" {
					if st, err := g.do(ctx, "POST", "/v1/streams/"+stream+"/subscribers/"+o.sub+"/ack", map[string]string{"cursor": o.cursor}, &map[string]any{}); err != nil || st != 200 {
						t.Fatalf("ack: %d %v", st, err)
					}
				}
			}
			for round, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
				phase := strconv.Itoa(round)
				if err := w.insert(ctx, "r"+phase, 20); err != nil {
					t.Fatal(err)
				}
				if err := w.insert(ctx, "r"+phase+"-sentinel", sentinels); err != nil {
					t.Fatal(err)
				}
				// Read everything but acknowledge only the first half.
				want := w.since(named.since)
				c, err := connectPull(ctx, g, stream, named.sub, "")
				if err != nil {
					t.Fatal(err)
				}
				got, err := readUntil(ctx, c, want)
				if err != nil {
					t.Fatal(err)
				}
				checkExactlyOnce(t, "named before "+sig.String(), got, want)
				half := len(got) / 2
				if err := c.ack(ctx, got[half-1].Cursor); err != nil {
					t.Fatal(err)
				}
				// The anonymous client keeps the cursor of what it read whole.
				ac, err := connectPull(ctx, g, stream, "", anon.cursor)
				if err != nil {
					t.Fatal(err)
				}
				agot, err := readUntil(ctx, ac, w.since(anon.since))
				if err != nil {
					t.Fatal(err)
				}
				checkExactlyOnce(t, "anonymous before "+sig.String(), agot, w.since(anon.since))
				anon.cursor, anon.since = agot[len(agot)-1].Cursor, len(w.since(0))

				g.restart(sig)
				unacked := emails(got[half:])
				// Rows written while the gateway was down, too.
				if err := w.insert(ctx, "r"+phase+"-down", sentinels); err != nil {
					t.Fatal(err)
				}
				if c, err = connectPull(ctx, g, stream, named.sub, ""); err != nil {
					t.Fatal(err)
				}
				wantAgain := append(unacked, w.since(len(w.since(0))-sentinels)...)
				again, err := readUntil(ctx, c, wantAgain)
				if err != nil {
					t.Fatalf("after %v: %v", sig, err)
				}
				checkExactlyOnce(t, "named after "+sig.String(), again, wantAgain)
				t.Logf("after %v: named subscriber got the %d unacknowledged rows again and %d new, nothing else", sig, len(unacked), sentinels)
				if err := c.ack(ctx, again[len(again)-1].Cursor); err != nil {
					t.Fatal(err)
				}
				named.since = len(w.since(0))

				if ac, err = connectPull(ctx, g, stream, "", anon.cursor); err != nil {
					t.Fatal(err)
				}
				agot, err = readUntil(ctx, ac, w.since(anon.since))
				if err != nil {
					t.Fatal(err)
				}
				checkExactlyOnce(t, "anonymous after "+sig.String(), agot, w.since(anon.since))
				anon.cursor, anon.since = agot[len(agot)-1].Cursor, len(w.since(0))
			}
		})
	}
}

func emails(evs []ev) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.str("email")
	}
	return out
}
