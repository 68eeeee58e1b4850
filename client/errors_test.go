package client_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vstream-gateway/vstream-gateway/auth"
	"github.com/vstream-gateway/vstream-gateway/client"
)

func dialErr(t *testing.T, url, stream string, opts ...client.Option) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, url, stream, append([]client.Option{quiet(), client.WithBackoff(10*time.Millisecond, 100*time.Millisecond)}, opts...)...)
	if err == nil {
		c.Close()
		t.Fatal("Dial succeeded")
	}
	return err
}

// What retrying cannot fix is returned by Dial as an *Error, matched by
// its code, on every transport.
func TestDialRefusals(t *testing.T) {
	g := startGateway(t)
	for _, tr := range transports {
		t.Run(tr.String(), func(t *testing.T) {
			err := dialErr(t, g.url, "nosuch", client.WithTransport(tr))
			var e *client.Error
			if !errors.Is(err, client.ErrStreamNotFound) || !errors.As(err, &e) || e.Status != http.StatusNotFound || e.Message == "" {
				t.Errorf("unknown stream: %v", err)
			}
			if errors.Is(err, client.ErrInvalidCursor) {
				t.Errorf("%v matches ErrInvalidCursor", err)
			}
			err = dialErr(t, g.url, "orders", client.WithTransport(tr), client.WithCursor("1forged"))
			if !errors.Is(err, client.ErrInvalidCursor) || !errors.As(err, &e) || e.Status != http.StatusBadRequest {
				t.Errorf("forged cursor: %v", err)
			}
		})
	}
}

// A token whose claims do not cover the stream is ErrForbidden; one the
// gateway refuses (401) makes the client ask its TokenSource again, once:
// a good token then connects, a second refusal is ErrUnauthorized.
func TestDialTokens(t *testing.T) {
	g := startGateway(t, withAuth...)
	bad := mint(t, "alice", time.Hour, nil) + "x" // the signature no longer matches
	good := mint(t, "alice", time.Hour, nil)
	for _, tr := range transports {
		t.Run(tr.String(), func(t *testing.T) {
			other := mint(t, "alice", time.Hour, func(c *auth.Claims) { c.Streams = []string{"other"} })
			err := dialErr(t, g.url, "orders", client.WithTransport(tr), client.WithToken(client.StaticToken(other)))
			if !errors.Is(err, client.ErrForbidden) {
				t.Errorf("token for another stream: %v", err)
			}

			var calls atomic.Int32
			err = dialErr(t, g.url, "orders", client.WithTransport(tr), client.WithToken(func(context.Context) (string, error) {
				calls.Add(1)
				return bad, nil
			}))
			if !errors.Is(err, client.ErrUnauthorized) || calls.Load() != 2 {
				t.Errorf("a token refused twice: %v after %d calls of the token source, want ErrUnauthorized after 2", err, calls.Load())
			}

			calls.Store(0)
			c := dial(t, g.url, client.WithTransport(tr), client.WithStart("now"), client.WithToken(func(context.Context) (string, error) {
				if calls.Add(1) == 1 {
					return bad, nil
				}
				return good, nil
			}))
			if calls.Load() != 2 {
				t.Errorf("token source called %d times, want 2", calls.Load())
			}
			before := len(g.log.written())
			g.log.append(3)
			got, _ := readRows(t, c, g.log.written()[before:])
			exactlyOnce(t, "after a refused token", got, g.log.written()[before:])
		})
	}
}

// Options the client cannot take are ErrOption, before anything is sent.
func TestDialOptions(t *testing.T) {
	for name, o := range map[string]client.Option{
		"subscriber": client.WithSubscriber("no spaces"),
		"start":      client.WithStart("later"),
		"queue":      client.WithQueue(0),
		"backoff":    client.WithBackoff(time.Second, time.Millisecond),
		"poll":       client.WithPoll(2*time.Minute, 10),
		"http":       client.WithHTTPClient(&http.Client{Timeout: time.Second}),
		"transport":  client.WithTransport(client.Transport(7)),
	} {
		if _, err := client.Dial(context.Background(), "http://127.0.0.1:1", "orders", o); !errors.Is(err, client.ErrOption) {
			t.Errorf("%s: %v, want ErrOption", name, err)
		}
	}
	for _, u := range []string{"", "gateway:8080", "ftp://x"} {
		if _, err := client.Dial(context.Background(), u, "orders"); !errors.Is(err, client.ErrOption) {
			t.Errorf("base URL %q: %v, want ErrOption", u, err)
		}
	}
	if _, err := client.Dial(context.Background(), "http://127.0.0.1:1", "a/b"); !errors.Is(err, client.ErrOption) {
		t.Errorf("stream a/b: %v, want ErrOption", err)
	}
}

// A gateway that cannot be reached makes Dial retry until its context
// ends, and say why it could not connect.
func TestDialUnreachable(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := client.Dial(ctx, "http://127.0.0.1:1", "orders", quiet(), client.WithBackoff(10*time.Millisecond, 50*time.Millisecond))
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "refused") {
		t.Fatalf("Dial of a closed port: %v", err)
	}
}
