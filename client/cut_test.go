package client_test

import (
	"context"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/vstream-gateway/vstream-gateway/client"
	"github.com/vstream-gateway/vstream-gateway/internal/wait"
)

// proxy relays TCP connections to a gateway, and cuts them on demand.
type proxy struct {
	l      net.Listener
	target string

	mu       sync.Mutex
	conns    map[net.Conn]bool
	accepted int
	held     chan struct{} // while not nil, new connections wait for it
	wg       sync.WaitGroup
}

func newProxy(t *testing.T, target string) *proxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{l: l, target: target, conns: map[net.Conn]bool{}}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(func() {
		l.Close()
		p.mu.Lock()
		if p.held != nil {
			close(p.held)
			p.held = nil
		}
		p.mu.Unlock()
		p.cut()
		p.wg.Wait()
	})
	return p
}

func (p *proxy) url() string { return "http://" + p.l.Addr().String() }

func (p *proxy) serve() {
	defer p.wg.Done()
	for {
		down, err := p.l.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		p.accepted++
		held := p.held
		p.mu.Unlock()
		if held != nil {
			<-held
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			down.Close()
			continue
		}
		p.mu.Lock()
		p.conns[down], p.conns[up] = true, true
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(down, up)
		go p.pipe(up, down)
	}
}

// pipe copies from one side to the other; when either side ends, both
// are closed.
func (p *proxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	io.Copy(dst, src)
	dst.Close()
	src.Close()
	p.mu.Lock()
	delete(p.conns, dst)
	delete(p.conns, src)
	p.mu.Unlock()
}

// cut resets every open connection, as a network failure or a load
// balancer dropping them would: no close frame, no end of the response,
// and what was in flight is lost (a reset discards what the receiver had
// not read yet). It returns how many connections it cut.
func (p *proxy) cut() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		if tc, ok := c.(*net.TCPConn); ok {
			tc.SetLinger(0)
		}
		c.Close()
	}
	return len(p.conns) / 2
}

// hold makes new connections wait until release.
func (p *proxy) hold() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.held = make(chan struct{})
}

func (p *proxy) release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	close(p.held)
	p.held = nil
}

// connections is how many connections the proxy has accepted.
func (p *proxy) connections() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.accepted
}

// A connection cut mid-stream, again and again while rows are being
// written and read, loses nothing and repeats nothing: the client resumes
// after the last whole transaction it received, on every transport,
// anonymous or named.
func TestCutMidStream(t *testing.T) {
	g := startGateway(t)
	p := newProxy(t, g.addr)
	for _, tr := range transports {
		for _, sub := range []string{"", "cut-" + tr.String()} {
			name := tr.String() + "/anonymous"
			if sub != "" {
				name = tr.String() + "/named"
			}
			t.Run(name, func(t *testing.T) {
				opts := []client.Option{client.WithTransport(tr), client.WithStart("now"), client.WithQueue(8)}
				if sub != "" {
					opts = append(opts, client.WithSubscriber(sub))
				}
				c := dial(t, p.url(), append(opts, client.WithPoll(time.Second, 50))...)
				before := len(g.log.written())
				conns := p.connections()
				var got []int
				cuts := 0
				for range 5 {
					g.log.append(300)
					// Read all but the last 200 rows written (so that the
					// connection read from is the one made after the last
					// cut), and cut it with the rest in flight.
					written := g.log.written()[before:]
					part, _ := readRows(t, c, written[len(got):len(written)-200])
					got = append(got, part...)
					cuts += p.cut()
				}
				want := g.log.written()[before:]
				rest, last := readRows(t, c, want[len(got):])
				got = append(got, rest...)
				exactlyOnce(t, name, got, want)
				// Each cut found the stream's connection (and maybe an
				// ack's), and each but the last left rows the client
				// needed: it reconnected (the last one's may all have
				// arrived).
				if n := p.connections() - conns; cuts < 5 || n < 4 {
					t.Errorf("%d connections cut, %d made after them", cuts, n)
				}
				if sub != "" {
					if err := c.Commit(context.Background(), last); err != nil {
						t.Fatal(err)
					}
					if err := c.Close(); err != nil {
						t.Fatal(err)
					}
					wait.For(t, "the last commit to be acked", 10*time.Second, func() bool { return g.storedCursor(t, sub) == last.Cursor })
				}
			})
		}
	}
}

// A client that has received nothing yet when its connection breaks
// reconnects from the stream's position when it was dialled, not from
// wherever "now" is then: rows written while it was away are not lost.
func TestCutBeforeFirstTransaction(t *testing.T) {
	g := startGateway(t)
	p := newProxy(t, g.addr)
	for _, tr := range transports {
		t.Run(tr.String(), func(t *testing.T) {
			c := dial(t, p.url(), client.WithTransport(tr), client.WithStart("now"), client.WithPoll(time.Second, 100))
			conns := p.connections()
			p.hold()
			p.cut()
			before := len(g.log.written())
			g.log.append(10)
			wait.For(t, "the client to reconnect", 30*time.Second, func() bool { return p.connections() > conns })
			p.release()
			want := g.log.written()[before:]
			got, _ := readRows(t, c, want)
			exactlyOnce(t, tr.String(), got, want)
		})
	}
}
