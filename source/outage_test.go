package source_test

import (
	"context"
	"fmt"
	"github.com/vstream-gateway/vstream-gateway/internal/syncbuf"
	"log/slog"
	"regexp"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"
	vtrpcpb "vitess.io/vitess/go/vt/proto/vtrpc"
	"vitess.io/vitess/go/vt/vterrors"

	"github.com/vstream-gateway/vstream-gateway/internal/fakevtgate"
	"github.com/vstream-gateway/vstream-gateway/metrics"
	"github.com/vstream-gateway/vstream-gateway/source"
)

// What a vtgate answers while it starts, or while a tablet restarts, is
// retried from the last transaction: the reader is not ended.
func TestTransientUpstreamErrorsRetried(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
	}{
		// vtgate's health check has not seen the tablet its picker chose.
		{"vtgate starting", vterrors.Errorf(vtrpcpb.Code_NOT_FOUND,
			"failed to get tablet connection to zone1-0000000200: target: customer.0.primary: tablet: cell:\"zone1\" uid:200 is either down or nonexistent")},
		// A tablet restarting or being reparented, after vtgate's own
		// three retries.
		{"tablet changing state", vterrors.Errorf(vtrpcpb.Code_FAILED_PRECONDITION,
			"persistent error in vstream for customer/0 on tablet zone1-0000000200; giving up: wrong tablet type: REPLICA, want: PRIMARY or []")},
		{"tablet not serving", vterrors.Errorf(vtrpcpb.Code_CLUSTER_EVENT, "operation not allowed in state NOT_SERVING")},
		{"vtgate unreachable", vterrors.Errorf(vtrpcpb.Code_UNAVAILABLE, "connection error: connect: connection refused")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !source.Retryable(tc.err) {
				t.Fatalf("Retryable(%v) = false", tc.err)
			}
			fake, c := setup(t, source.WithMaxRetryWait(100*time.Millisecond))
			fake.Push(fakevtgate.Script{Batches: [][]*binlogdatapb.VEvent{
				s0.Txn(100, pos(11), tField, s0.Insert("t", 100, []string{"1", "a"})),
			}, Err: tc.err}, fakevtgate.Script{Err: tc.err}, fakevtgate.Script{Open: true, Batches: [][]*binlogdatapb.VEvent{
				s0.Txn(101, pos(12), tField, s0.Insert("t", 101, []string{"2", "b"})),
			}})
			r := open(t, c, pos(10))
			samePos(t, "first", next(t, r).VGtid, pos(11))
			samePos(t, "after the failures", next(t, r).VGtid, pos(12))
			for i := 1; i <= 2; i++ {
				samePos(t, "retry", fake.Call(t, i).Req.Vgtid, pos(11))
			}
		})
	}
}

// A vtgate that goes away and comes back: the reader waits, resumes from
// its last transaction once vtgate serves again, and the outage is logged
// (begin, end with its duration) and counted.
func TestUpstreamOutageLoggedAndCounted(t *testing.T) {
	logs := &syncbuf.Buffer{}
	fake := fakevtgate.New(t)
	fake.SetCreateTable("t", tText)
	c := dial(t, fake, source.WithLogger(slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))),
		source.WithMaxRetryWait(200*time.Millisecond))
	t.Cleanup(c.Close)
	outSpec := spec
	outSpec.Name = fmt.Sprintf("outage-test-%d", time.Now().UnixNano()) // its own metrics per run (-count)
	fake.Push(fakevtgate.Script{Open: true, Batches: [][]*binlogdatapb.VEvent{
		s0.Txn(100, pos(11), tField, s0.Insert("t", 100, []string{"1", "a"})),
	}})
	r := c.Open(context.Background(), outSpec, pos(10))
	t.Cleanup(r.Close)
	samePos(t, "before the outage", next(t, r).VGtid, pos(11))

	fake.Down()
	waitFor(t, "the outage to be logged", func() bool { return strings.Contains(logs.String(), "upstream unavailable") })
	waitFor(t, "the outage to be counted as lasting", func() bool {
		return gauge(t, "vsg_upstream_unavailable", outSpec.Name) == 1 && gauge(t, "vsg_upstream_unavailable_seconds", outSpec.Name) >= 0.3
	})
	if _, ok, err := r.TryNext(); ok || err != nil {
		t.Fatalf("during the outage: delivery %v, err %v", ok, err)
	}

	fake.Push(fakevtgate.Script{Open: true, Batches: [][]*binlogdatapb.VEvent{
		s0.Txn(101, pos(12), tField, s0.Insert("t", 101, []string{"2", "b"})),
	}})
	fake.Up(t)
	samePos(t, "after the outage", next(t, r).VGtid, pos(12))
	samePos(t, "resumed request", fake.Call(t, 1).Req.Vgtid, pos(11))

	waitFor(t, "the end of the outage to be logged", func() bool { return strings.Contains(logs.String(), "upstream available again") })
	m := regexp.MustCompile(`upstream available again.* unavailable_for=(\S+)`).FindStringSubmatch(logs.String())
	if m == nil {
		t.Fatalf("no duration in the log:\n%s", logs)
	}
	if d, err := time.ParseDuration(m[1]); err != nil || d < 300*time.Millisecond {
		t.Errorf("logged outage %q, want at least the 300ms it lasted", m[1])
	}
	if n := strings.Count(logs.String(), "level=WARN"); n != 1 {
		t.Errorf("%d warnings for one short outage, want 1:\n%s", n, logs)
	}
	if v := gauge(t, "vsg_upstream_unavailable", outSpec.Name); v != 0 {
		t.Errorf("vsg_upstream_unavailable %v after the outage", v)
	}
	if v := counter(t, "vsg_upstream_interruptions_total", outSpec.Name); v != 1 {
		t.Errorf("vsg_upstream_interruptions_total %v, want 1", v)
	}
	if n, sum := histogram(t, "vsg_upstream_outage_seconds", outSpec.Name); n != 1 || sum < 0.3 {
		t.Errorf("vsg_upstream_outage_seconds: %d observations, sum %v; want 1 of at least 0.3", n, sum)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// metric returns the series of family name labelled stream=stream.
func metric(t *testing.T, name, stream string) *dto.Metric {
	t.Helper()
	mfs, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.Metric {
			for _, l := range m.Label {
				if l.GetName() == "stream" && l.GetValue() == stream {
					return m
				}
			}
		}
	}
	return nil
}

func gauge(t *testing.T, name, stream string) float64 {
	return metric(t, name, stream).GetGauge().GetValue()
}

func counter(t *testing.T, name, stream string) float64 {
	return metric(t, name, stream).GetCounter().GetValue()
}

func histogram(t *testing.T, name, stream string) (uint64, float64) {
	h := metric(t, name, stream).GetHistogram()
	return h.GetSampleCount(), h.GetSampleSum()
}
