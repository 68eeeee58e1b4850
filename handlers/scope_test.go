package handlers

import (
	"context"
	"testing"

	"github.com/vstream-gateway/vstream-gateway/auth"
	"github.com/vstream-gateway/vstream-gateway/event"
	"github.com/vstream-gateway/vstream-gateway/hub"
	"github.com/vstream-gateway/vstream-gateway/source"
)

type recordingSink struct {
	got  []*hub.Delivery
	more []bool
}

func (r *recordingSink) deliver(d *hub.Delivery, more bool) error {
	r.got = append(r.got, d)
	r.more = append(r.more, more)
	return nil
}

func (r *recordingSink) heartbeat(string) error { return nil }

func (r *recordingSink) flushHeld() error { return nil }

func change(table string) event.Event {
	return event.Event{Type: event.TypeChange, Op: event.OpInsert, Keyspace: "customer", Table: table, JSON: []byte(`{"type":"change"`)}
}

// TestScopedSink: push transports get only the token's tables, the shared
// transaction is untouched, and an emptied delivery still reaches the sink
// (it may have to flush).
func TestScopedSink(t *testing.T) {
	p, err := principalWithTables(t, "customer.customer")
	if err != nil {
		t.Fatal(err)
	}
	ctx := auth.NewContext(context.Background(), p)
	rec := &recordingSink{}
	s := (&API{}).scoped(ctx, "orders", "ws", rec)
	txn := &source.Txn{Events: []event.Event{change("customer"), change("corder"), change("customer")}, CommitTS: 1}
	s.deliver(&hub.Delivery{Txn: txn, Cursor: "c1"}, true)
	s.deliver(&hub.Delivery{Txn: &source.Txn{Events: []event.Event{change("corder")}}, Cursor: "c2"}, false)
	if len(rec.got) != 2 || len(rec.got[0].Events) != 2 || len(rec.got[1].Events) != 0 || rec.more[1] {
		t.Fatalf("sink got %+v", rec.got)
	}
	for _, e := range rec.got[0].Events {
		if e.Table != "customer" {
			t.Errorf("sent an event of %s", e.Table)
		}
	}
	if rec.got[0].Cursor != "c1" || rec.got[1].Cursor != "c2" {
		t.Error("cursor lost")
	}
	if len(txn.Events) != 3 || txn.Events[1].Table != "corder" {
		t.Error("the shared transaction was modified")
	}

	// Without a principal (no middleware) nothing is filtered.
	rec = &recordingSink{}
	(&API{}).scoped(context.Background(), "orders", "ws", rec).deliver(&hub.Delivery{Txn: txn, Cursor: "c1"}, false)
	if len(rec.got[0].Events) != 3 {
		t.Error("filtered without a principal")
	}
}

func principalWithTables(t *testing.T, tables ...string) (*auth.Principal, error) {
	secret := []byte("handlers-test-secret-0123456789abcdef")
	v, err := auth.New(context.Background(), auth.WithHMACSecrets(secret))
	if err != nil {
		return nil, err
	}
	c := auth.Claims{Streams: []string{"*"}, Tables: tables}
	c.Subject = "alice"
	tok, err := auth.MintHS256(secret, c, 60e9)
	if err != nil {
		return nil, err
	}
	return v.Verify(context.Background(), tok)
}

// BenchmarkOutbound is the per-delivery cost of scoping and counting a
// ten-event transaction: all tables allowed, and half of them filtered.
func BenchmarkOutbound(b *testing.B) {
	events := make([]event.Event, 10)
	for i := range events {
		events[i] = change([]string{"customer", "corder"}[i%2])
	}
	d := &hub.Delivery{Txn: &source.Txn{Events: events, CommitTS: 1}, Cursor: "c"}
	for _, c := range []struct {
		name   string
		tables []string
	}{{"all", []string{"*"}}, {"half", []string{"customer.customer"}}} {
		p, err := principalWithTables(nil, c.tables...)
		if err != nil {
			b.Fatal(err)
		}
		o := outboundFor(auth.NewContext(context.Background(), p), "bench", "ws")
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				o.apply(d)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(events)), "ns/event")
		})
	}
}
