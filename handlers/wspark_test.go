package handlers

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"

	"github.com/vstream-gateway/vstream-gateway/cursor"
	"github.com/vstream-gateway/vstream-gateway/hub"
	"github.com/vstream-gateway/vstream-gateway/internal/fakevtgate"
	"github.com/vstream-gateway/vstream-gateway/internal/wait"
	"github.com/vstream-gateway/vstream-gateway/source"
	"github.com/vstream-gateway/vstream-gateway/store/boltstore"
	"github.com/vstream-gateway/vstream-gateway/streams"
)

// parkEnv is a hub with a running tail on a fake vtgate: append adds
// one-row transactions to the tail.
type parkEnv struct {
	hub    *hub.Hub
	def    *streams.Definition
	append func(from, to int)
}

func newParkEnv(t *testing.T) *parkEnv {
	t.Helper()
	const ks = "customer"
	s0 := fakevtgate.Shard{Keyspace: ks, Name: "0"}
	pos := func(n int) *binlogdatapb.VGtid { return fakevtgate.VGtid(ks, "0", fmt.Sprintf("MariaDB/0-1-%d", n)) }
	fake := fakevtgate.New(t)
	fake.SetCreateTable("t", "CREATE TABLE `t` (`id` bigint(20) NOT NULL, `doc` longtext, PRIMARY KEY (`id`))")
	fake.SetTopology(ks, []string{"0"}, nil)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	src, err := source.Dial(ctx, fake.Addr, source.WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(src.Close)
	st, err := boltstore.Open(filepath.Join(t.TempDir(), "state.db"), boltstore.WithNoSync())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	codec, err := cursor.NewCodec([]byte("test-signing-key-0123456789"), nil)
	if err != nil {
		t.Fatal(err)
	}
	h, err := hub.New(src, codec, st, hub.WithLogger(log),
		hub.WithTails(hub.TailOptions{RingBytes: 1 << 20, RingEntries: 100, Idle: time.Minute, StartWait: 5 * time.Second}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	def := &streams.Definition{Name: "orders", Keyspace: ks, Tables: []string{"t"}, CreatedAt: time.Unix(1_700_000_000, 0)}
	if err := def.Normalize(); err != nil {
		t.Fatal(err)
	}
	fake.Push(fakevtgate.Script{Open: true, Batches: [][]*binlogdatapb.VEvent{{s0.Pos(pos(10))}}})
	first, err := h.Open(context.Background(), def, hub.From{}) // starts the tail
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(first.Close)
	if _, err := first.Next(ctx); err != nil {
		t.Fatal(err)
	}
	call := fake.Call(t, 0)
	return &parkEnv{hub: h, def: def, append: func(from, to int) {
		var batches [][]*binlogdatapb.VEvent
		for i := from; i <= to; i++ {
			b := s0.Txn(time.Now().Unix(), pos(i), s0.Insert("t", 100, []string{fmt.Sprint(i), "x"}))
			if i == from {
				b = append([]*binlogdatapb.VEvent{s0.Field("t", fakevtgate.BigintPK("id"), fakevtgate.LongText("doc"))}, b...)
			}
			batches = append(batches, b)
		}
		call.Answer(t, fakevtgate.Script{Open: true, Batches: batches})
	}}
}

// A parked subscription woken by the tail whose queue is full (the client
// is behind) is handed over to the producer with what was read: the
// producer blocks on the full queue, delivers the transaction once the
// client takes one message, and, when the client stays behind for
// --ws-slow-after, ends the session as a slow consumer (4008). Without the
// hand-over the transaction read would be lost, and no 4008 would come
// from the queue.
func TestWSParkedFullQueueHandsOver(t *testing.T) {
	e := newParkEnv(t)
	cfg := DefaultWebSocketConfig()
	cfg.Queue, cfg.SlowAfter = 1, 300*time.Millisecond
	ws, woken := parkedSession(t, e, cfg)

	// The client is behind: its queue (one message) is full.
	wakeOnFullQueue(t, e, ws, woken, 11)
	// The client takes one message: the producer's transaction follows it.
	if m, _ := ws.queue.pop(); m.cursor != "earlier" {
		t.Fatalf("first message %+v, want the earlier heartbeat", m)
	}
	var got *wsMessage
	wait.For(t, "the transaction read by the writer to reach the queue", 30*time.Second, func() bool {
		if m, ok := ws.queue.pop(); ok && m.txn != nil {
			got = &m
		}
		return got != nil
	})
	if len(got.txn.Events) == 0 {
		t.Fatalf("queued %+v, want the transaction of row 11", got.txn)
	}

	// The client stops reading: the producer, blocked on the full queue,
	// ends the session as a slow consumer once --ws-slow-after passed.
	if ws.producing {
		ws.parked = <-ws.produced // parked again
		ws.producing = false
	}
	wakeOnFullQueue(t, e, ws, woken, 12)
	select {
	case d := <-ws.closing:
		if d.Code != DisconnectSlow.Code {
			t.Fatalf("closed with %d %s, want %d", d.Code, d.Reason, DisconnectSlow.Code)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no slow-consumer close within 30 s of a queue full for --ws-slow-after (300ms)")
	}
}

func drainQueue(ws *wsSession) {
	for {
		if _, ok := ws.queue.pop(); !ok {
			return
		}
	}
}

// parkedSession is a WebSocket session on e's stream, parked on the tail
// as a new session is after its first read. The test plays the writer
// (kicks do nothing); woken is signalled by the tail's wake-ups.
func parkedSession(t *testing.T, e *parkEnv, cfg WebSocketConfig) (*wsSession, <-chan struct{}) {
	t.Helper()
	s, err := e.hub.Open(context.Background(), e.def, hub.From{})
	if err != nil {
		t.Fatal(err)
	}
	a := &API{WebSocketConfig: cfg, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	ws := a.newWSSession(httptest.NewRequest("GET", "/v1/streams/orders/ws", nil), e.def, "", s, nil, nil)
	ws.writer.done()
	woken := make(chan struct{}, 1)
	ws.wake = func() { signal(woken) }
	t.Cleanup(func() {
		ws.cancel()
		if ws.producing {
			<-ws.produced
		}
		ws.stopBeat()
		s.Close()
	})
	ws.startProducer(nil)
	if p := <-ws.produced; p == nil {
		t.Fatal("a subscription at the tail's head was not parked")
	} else {
		ws.parked = p
	}
	ws.producing = false
	drainQueue(ws)
	return ws, woken
}

// wakeOnFullQueue fills the client's queue (one message), appends row id
// to the tail and lets the woken writer read it: a producer must take over
// the full queue.
func wakeOnFullQueue(t *testing.T, e *parkEnv, ws *wsSession, woken <-chan struct{}, id int) {
	t.Helper()
	if !ws.sink.tryHeartbeat("earlier") {
		t.Fatal("could not fill the queue")
	}
	e.append(id, id)
	waitWoken(t, woken)
	ws.drain()
	if !ws.producing {
		t.Fatal("the writer kept a subscription whose delivery found the queue full: no producer took over")
	}
}

func waitWoken(t *testing.T, woken <-chan struct{}) {
	t.Helper()
	select {
	case <-woken:
	case <-time.After(30 * time.Second):
		t.Fatal("the parked subscription was not woken within 30 s of the tail's transaction")
	}
}
