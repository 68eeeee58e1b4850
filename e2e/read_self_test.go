package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// scriptClient delivers the events sent on evs.
type scriptClient struct{ evs chan ev }

func (c *scriptClient) next(ctx context.Context) (ev, error) {
	select {
	case e := <-c.evs:
		return e, nil
	case <-ctx.Done():
		return ev{}, ctx.Err()
	}
}
func (c *scriptClient) ack(context.Context, string) error { return nil }
func (c *scriptClient) close()                            {}

func row(shard, email string) ev {
	b, _ := json.Marshal(email)
	return ev{Type: "change", Op: "insert", Shard: shard, After: map[string]json.RawMessage{"email": b}}
}

// TestReadUntilSeesLateRepeats checks the reads' end (no cluster needed,
// the markers are played by the test): a row repeated after every
// expected row arrived, ahead of the end markers, is read and reported,
// and so are unexpected rows; other reads' markers are skipped.
func TestReadUntilSeesLateRepeats(t *testing.T) {
	needE2E(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := &scriptClient{evs: make(chan ev, 100)}
	end := newReadEnd(1)
	end.write = func(_ context.Context, id string) error {
		// What the gateway sends after the last expected row: a repeat
		// on one shard, a stray row, another read's marker, then this
		// read's markers.
		c.evs <- row("-80", "a")
		c.evs <- row("80-", "stray")
		c.evs <- row("80-", markerEmail("other", 0, 1))
		c.evs <- ev{Type: "heartbeat"}
		for i := range 2 {
			c.evs <- row([]string{"-80", "80-"}[i], markerEmail(id, i, 2))
		}
		return nil
	}
	c.evs <- row("-80", "a")
	c.evs <- row("-80", "b")
	controls := 0
	got, err := readTo(ctx, c, []string{"a", "b"}, end, func(e ev) {
		if e.Type != "change" {
			controls++
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := "a b a stray"; joinEmails(got) != want || controls != 1 {
		t.Fatalf("read %q and %d control events, want %q and 1", joinEmails(got), controls, want)
	}
	ft := &failRecorder{}
	checkExactlyOnce(ft, "late repeat", got, []string{"a", "b"})
	if len(ft.errs) != 3 { // a out of order on -80, a twice, stray unexpected
		t.Errorf("checkExactlyOnce reported %q, want three errors", ft.errs)
	}

	// Markers that cannot be written end the read with why.
	end = newReadEnd(1)
	end.write = func(context.Context, string) error { return errors.New("no database") }
	c.evs <- row("-80", "a")
	if _, err := readTo(ctx, c, []string{"a"}, end, nil); err == nil || !strings.Contains(err.Error(), "no database") {
		t.Fatalf("a read whose markers were not written: %v", err)
	}
}

func joinEmails(evs []ev) string { return strings.Join(emails(evs), " ") }

// failRecorder records what a check reports.
type failRecorder struct{ errs []string }

func (f *failRecorder) Helper() {}
func (f *failRecorder) Errorf(format string, args ...any) {
	f.errs = append(f.errs, fmt.Sprintf(format, args...))
}
