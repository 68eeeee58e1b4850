package bridge

import (
	"testing"

	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"

	"github.com/vstream-gateway/vstream-gateway/hub"
	"github.com/vstream-gateway/vstream-gateway/internal/fakevtgate"
)

// A named subscriber coming back after a reshard at a cursor where another
// reader's pull subscription is parked never gets that subscription: it
// was planned for the other reader (here an anonymous token reading the
// old shard's VStream), not with the subscriber's bridges. The subscriber
// reads its spool; the anonymous reader's next request still finds its
// own. A subscriber with bridges is planned afresh even over a
// subscription it parked itself before the bridge was recorded.
func TestParkedSubscriptionsBelongToTheirSubscriber(t *testing.T) {
	e := newEnv(t)
	j := e.recordJournal(t)
	e.fake.SetTopology(ks, []string{"-80", "80-"}, []string{"0"}) // switched, not deleted
	e.ack(t, "alice", pos(10))
	at10 := e.token(t, pos(10))

	// An anonymous reader at alice's cursor, and alice herself before the
	// bridge, both parked there (their VStreams not opened yet: a
	// subscription opens its own at its first read).
	anon := e.open(t, hub.From{Token: at10})
	e.hub.Park(anon)
	early, err := e.hub.Open(t.Context(), e.def, hub.From{Subscriber: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	e.hub.Park(early)

	e.fake.Push(fakevtgate.Script{Batches: append([][]*binlogdatapb.VEvent{
		s0.Txn(100, pos(11), field(s0), row(s0, "1")),
		s0.Txn(100, pos(13), row(s0, "2"), row(s0, "3")),
	}, journalEnd()...)})
	bridge(t, e, j)
	e.fake.SetTopology(ks, []string{"-80", "80-"}, nil) // complete: shard 0 gone

	calls := e.fake.Calls()
	back := e.open(t, hub.From{Subscriber: "alice"})
	if back == anon || back == early {
		t.Fatal("alice was handed a subscription parked before her bridge (another reader's or her own)")
	}
	d := next(t, back)
	if got := summary(t, d.Txn); got != "1" {
		t.Fatalf("alice's first transaction %q, want 1 from her spool", got)
	}
	if again := e.open(t, hub.From{Token: at10}); again != anon {
		t.Fatal("the anonymous reader's next request did not find its parked subscription")
	}
	// Alice pages on with the page's cursor alone: her parked subscription
	// goes on in the spool.
	e.hub.Park(back)
	page2 := e.open(t, hub.From{Token: d.Cursor})
	if page2 != back {
		t.Fatal("a request with alice's next cursor did not take her parked subscription")
	}
	if got := summary(t, next(t, page2).Txn); got != "2 3" {
		t.Fatalf("alice's second page %q, want 2 3 from her spool", got)
	}
	if n := e.fake.Calls(); n != calls {
		t.Fatalf("%d VStream calls while alice read her spool, want none", n-calls)
	}
}
