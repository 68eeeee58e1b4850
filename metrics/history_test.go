package metrics

import (
	"testing"
	"time"
)

func TestHistoryRates(t *testing.T) {
	at := time.Unix(1000, 0)
	live := map[string]*StreamLive{"s": {EventsOut: map[string]float64{}, Readers: map[string]int{}}}
	h := NewHistory(5*time.Second, 15*time.Second) // three samples
	h.live = func() map[string]*StreamLive { return live }
	h.now = func() time.Time { return at }
	step := func(in float64, out map[string]float64, readers map[string]int) {
		live["s"].EventsIn, live["s"].EventsOut, live["s"].Readers = in, out, readers
		h.Sample()
		at = at.Add(5 * time.Second)
	}
	step(0, map[string]float64{}, nil)
	if in, out := h.Rates("s"); in != 0 || out != 0 {
		t.Fatalf("one sample: rates %v %v, want 0", in, out)
	}
	step(50, map[string]float64{"ws": 100, "sse": 50}, map[string]int{"ws": 2, "sse": 1})
	if in, out := h.Rates("s"); in != 10 || out != 30 {
		t.Fatalf("rates %v %v, want 10 30", in, out)
	}
	step(60, map[string]float64{"ws": 110, "sse": 50}, map[string]int{"ws": 1})
	step(10, map[string]float64{"ws": 120, "sse": 50}, nil) // in restarted: counted from 0
	s := h.Series("s")
	if len(s.T) != 2 { // three samples kept: two intervals
		t.Fatalf("series %+v: want 2 points", s)
	}
	if s.InPerSec[0] != 2 || s.InPerSec[1] != 2 || s.OutPerSec[0] != 2 || s.Readers[0] != 1 || s.Readers[1] != 0 {
		t.Fatalf("series %+v", s)
	}
	if s.T[1]-s.T[0] != 5 {
		t.Fatalf("times %v", s.T)
	}
	if e := h.Series("other"); len(e.T) != 2 || e.InPerSec[0] != 0 {
		t.Fatalf("unknown stream: %+v", e)
	}
}

func TestLive(t *testing.T) {
	EventsIn("live-s", 4)
	Outbound("live-s", TransportSSE).Sent(3, 0, -1)
	done := ClientConnected("live-s", TransportWS)
	defer done()
	TailStarted("live-s")
	defer TailStopped("live-s")
	TailRing("live-s", 7, 700)
	l := Live()["live-s"]
	if l == nil || l.EventsIn != 4 || l.EventsOut[TransportSSE] != 3 || l.Readers[TransportWS] != 1 || !l.Tail || l.RingEntries != 7 || l.RingBytes != 700 {
		t.Fatalf("live: %+v", l)
	}
}
