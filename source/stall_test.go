package source_test

import (
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"testing"
	"time"

	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"

	"github.com/vstream-gateway/vstream-gateway/internal/fakevtgate"
	"github.com/vstream-gateway/vstream-gateway/internal/syncbuf"
	"github.com/vstream-gateway/vstream-gateway/source"
)

const stallTimeout = 300 * time.Millisecond

// A VStream that goes silent — here in the middle of a transaction, as
// when the network starts dropping packets — is cancelled after the stall
// timeout and reopened from the last whole transaction: the cut
// transaction is delivered once, whole, from the new stream. The stall is
// logged (with how long vtgate was silent) and counted, and the outage it
// started is measured from the last event received, not from its
// detection.
func TestStalledStreamReopened(t *testing.T) {
	logs := &syncbuf.Buffer{}
	fake := fakevtgate.New(t)
	fake.SetCreateTable("t", tText)
	c := dial(t, fake, source.WithStallTimeout(stallTimeout), source.WithMaxRetryWait(100*time.Millisecond),
		source.WithLogger(slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	t.Cleanup(c.Close)
	stallSpec := spec
	// A name of its own per run: the metrics are the process's (-count).
	stallSpec.Name = fmt.Sprintf("stall-test-%d", time.Now().UnixNano())
	fake.Push(cutMidTransaction()...)
	r := c.Open(context.Background(), stallSpec, pos(10))
	t.Cleanup(r.Close)
	samePos(t, "before the stall", next(t, r).VGtid, pos(11))
	lastEvent := time.Now()

	first := fake.Call(t, 0)
	select {
	case <-first.Done():
	case <-time.After(fakevtgate.Timeout):
		t.Fatal("the silent stream was not cancelled")
	}
	cancelledAfter := time.Since(lastEvent)
	if cancelledAfter < stallTimeout {
		t.Errorf("the stream was cancelled %v after its last event, before the stall timeout %v", cancelledAfter, stallTimeout)
	}
	samePos(t, "reopened from", fake.Call(t, 1).Req.Vgtid, pos(11))
	txn := next(t, r)
	samePos(t, "after the stall", txn.VGtid, pos(12))
	if got := summary(t, txn); got != `insert {"id":2,"doc":"b"}` {
		t.Fatalf("the cut transaction: %s", got)
	}

	waitFor(t, "the end of the outage to be logged", func() bool { return strings.Contains(logs.String(), "upstream available again") })
	if !regexp.MustCompile(`level=WARN msg="upstream stalled: vtgate sent nothing, not even a heartbeat; reopening from the last transaction" stream=` + regexp.QuoteMeta(stallSpec.Name) + ` .*silent_for=\S+ stall_timeout=300ms`).MatchString(logs.String()) {
		t.Errorf("no stall warning:\n%s", logs)
	}
	m := regexp.MustCompile(`upstream available again.* unavailable_for=(\S+)`).FindStringSubmatch(logs.String())
	if d, err := time.ParseDuration(m[1]); err != nil || d < stallTimeout {
		t.Errorf("logged outage %q, want at least the stall timeout %v (counted from the last event)", m[1], stallTimeout)
	}
	if v := counter(t, "vsg_upstream_stalls_total", stallSpec.Name); v != 1 {
		t.Errorf("vsg_upstream_stalls_total %v, want 1", v)
	}
	if n, sum := histogram(t, "vsg_upstream_outage_seconds", stallSpec.Name); n != 1 || sum < stallTimeout.Seconds() {
		t.Errorf("vsg_upstream_outage_seconds: %d observations, sum %v; want 1 of at least %v", n, sum, stallTimeout.Seconds())
	}
}

// Heartbeats are life: a stream without transactions but with vtgate's
// heartbeats is never taken for stalled.
func TestHeartbeatsKeepStreamAlive(t *testing.T) {
	fake, c := setup(t, source.WithStallTimeout(stallTimeout))
	fake.Push(fakevtgate.Script{Open: true, Batches: [][]*binlogdatapb.VEvent{
		s0.Txn(100, pos(11), tField, s0.Insert("t", 100, []string{"1", "a"})),
	}})
	r := open(t, c, pos(10))
	next(t, r)
	call := fake.Call(t, 0)
	// Ten heartbeats, each a third of the stall timeout after the one
	// before: three stall timeouts of heartbeats only.
	for i := 0; i < 10; i++ {
		call.Answer(t, fakevtgate.Script{Open: true, Batches: [][]*binlogdatapb.VEvent{{fakevtgate.Heartbeat()}}})
		if hb := next(t, r); !hb.Heartbeat {
			t.Fatalf("want a heartbeat, got %+v", hb)
		}
		time.Sleep(stallTimeout / 3) // vtgate's heartbeat interval is the scenario
	}
	if n := fake.Calls(); n != 1 {
		t.Fatalf("%d VStream calls: a stream with heartbeats was reopened", n)
	}
}

// A reader held up by its consumer does not read, and vtgate, paused by
// flow control, cannot send: that silence is not a stall. Nothing is
// reopened while the consumer takes several stall timeouts to come back.
func TestSlowConsumerIsNotAStall(t *testing.T) {
	fake, c := setup(t, source.WithStallTimeout(stallTimeout), source.WithQueue(1))
	var batches [][]*binlogdatapb.VEvent
	for i := 0; i < 5; i++ {
		batches = append(batches, s0.Txn(100, pos(11+i), tField, s0.Insert("t", 100, []string{"1", "a"})))
	}
	fake.Push(fakevtgate.Script{Open: true, Batches: batches})
	r := open(t, c, pos(10))
	waitFor(t, "the reader to fill its queue", func() bool { return r.Buffered() == 1 })
	time.Sleep(3 * stallTimeout) // the consumer's absence is the scenario
	for i := 0; i < 5; i++ {
		samePos(t, "after the pause", next(t, r).VGtid, pos(11+i))
	}
	if n := fake.Calls(); n != 1 {
		t.Fatalf("%d VStream calls: a reader waiting for its consumer took vtgate for stalled", n)
	}
}

// Without heartbeats an idle stream is silent by design: no stall
// detection, however long the silence.
func TestNoStallDetectionWithoutHeartbeats(t *testing.T) {
	fake, c := setup(t, source.WithStallTimeout(stallTimeout), source.WithHeartbeat(0))
	fake.Push(fakevtgate.Script{Open: true, Batches: [][]*binlogdatapb.VEvent{
		s0.Txn(100, pos(11), tField, s0.Insert("t", 100, []string{"1", "a"})),
	}})
	r := open(t, c, pos(10))
	next(t, r)
	if got := fake.Call(t, 0).Req.Flags.GetHeartbeatInterval(); got != 0 {
		t.Fatalf("heartbeat interval %d asked", got)
	}
	time.Sleep(3 * stallTimeout) // the silence is the scenario
	if n := fake.Calls(); n != 1 {
		t.Fatalf("%d VStream calls: a stream without heartbeats was taken for stalled", n)
	}
}
