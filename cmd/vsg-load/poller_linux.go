package main

import (
	"errors"
	"io"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

// The readers' WebSockets are read by one epoll loop per CPU instead of a
// goroutine each. Through Go's netpoller every message a server writes
// costs the tool a goroutine wake-up, a read(2) that gets it and a read(2)
// that finds nothing more (the netpoller forgets readiness seen before a
// read, so a read must fail before it waits); at K = 1,000 that was half
// the tool's CPU, taken from the servers under test on a shared machine.
// Edge-triggered epoll needs one read(2) per batch of frames: a short read
// has emptied the socket, and whatever comes after it is a new edge.

// poller is one epoll loop.
type poller struct {
	epfd    int
	mu      sync.Mutex
	conns   map[int32]*polled
	running bool // the loop runs; it stops when it has had no connections for a while
}

// polled is a connection a poller reads.
type polled struct {
	p     *poller
	c     *wsConn
	fd    int
	h     handler
	oob   []byte // recvmsg's control data (the arrival time); nil without timestamps
	msg   syscall.Msghdr
	iov   syscall.Iovec
	mu    sync.Mutex // held while the connection is read and its handler runs
	ended bool
	done  chan error
}

var pollers struct {
	once sync.Once
	ps   []*poller
	err  error
	next atomic.Uint32
}

// pollerIdle is how long a loop without connections lives (so tests end
// with no goroutine of the tool's left).
const pollerIdle = 100 * time.Millisecond

func pollerFor() (*poller, error) {
	pollers.once.Do(func() {
		for range runtime.GOMAXPROCS(0) {
			fd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
			if err != nil {
				pollers.err = err
				return
			}
			pollers.ps = append(pollers.ps, &poller{epfd: fd, conns: map[int32]*polled{}})
		}
	})
	if pollers.err != nil {
		return nil, pollers.err
	}
	return pollers.ps[int(pollers.next.Add(1))%len(pollers.ps)], nil
}

// each calls h with every data message until the connection ends, and
// returns why it ended (net.ErrClosed after close).
func (c *wsConn) each(h handler) error {
	p, err := pollerFor()
	if err != nil {
		return c.eachBlocking(h)
	}
	fd, err := rawFD(c.conn)
	if err != nil {
		return c.eachBlocking(h)
	}
	// Frames that came with the handshake.
	if err := c.parse(time.Now().UnixNano(), h); err != nil {
		return err
	}
	pc := &polled{p: p, c: c, fd: fd, h: h, done: make(chan error, 1)}
	c.cmu.Lock()
	if c.closed {
		c.cmu.Unlock()
		return net.ErrClosed
	}
	c.pc = pc
	c.cmu.Unlock()
	if c.stamped {
		pc.oob = make([]byte, syscall.CmsgSpace(int(unsafe.Sizeof(syscall.Timespec{}))))
	}
	if err := p.add(pc); err != nil {
		return err
	}
	return <-pc.done
}

// recvmsg reads into buf with the control data into pc.oob. By hand:
// syscall.Recvmsg allocates a source address per call, which at 200,000
// reads a second would be the tool's garbage, collected on the servers'
// CPUs.
func (pc *polled) recvmsg(buf []byte) (n, oobn int, err error) {
	pc.iov.Base = &buf[0]
	pc.iov.SetLen(len(buf))
	pc.msg = syscall.Msghdr{Iov: &pc.iov, Iovlen: 1, Control: &pc.oob[0]}
	pc.msg.SetControllen(len(pc.oob))
	r, _, e := syscall.Syscall(syscall.SYS_RECVMSG, uintptr(pc.fd), uintptr(unsafe.Pointer(&pc.msg)), 0)
	if e != 0 {
		return 0, 0, e
	}
	return int(r), int(pc.msg.Controllen), nil
}

// arrival is the kernel's receive time (Unix ns) in a recvmsg's control
// data: on TCP, that of the last segment the read took, so frames of
// earlier segments of the same read get a time a little late, never
// early. 0 without one.
func arrival(oob []byte) int64 {
	for len(oob) >= syscall.CmsgLen(0) {
		h := (*syscall.Cmsghdr)(unsafe.Pointer(&oob[0]))
		n := int(h.Len)
		if n < syscall.CmsgLen(0) || n > len(oob) {
			return 0
		}
		if h.Level == syscall.SOL_SOCKET && h.Type == syscall.SCM_TIMESTAMPNS &&
			n >= syscall.CmsgLen(int(unsafe.Sizeof(syscall.Timespec{}))) {
			ts := (*syscall.Timespec)(unsafe.Pointer(&oob[syscall.CmsgLen(0)]))
			return ts.Nano()
		}
		oob = oob[min(syscall.CmsgSpace(n-syscall.CmsgLen(0)), len(oob)):]
	}
	return 0
}

// stampArrivals asks the kernel to stamp each segment of conn as it
// arrives (SO_TIMESTAMPNS), before anything is read from it: the row's
// arrival at the reader's socket, apart from when the tool got the CPU to
// read it. Segments queued before the option are not stamped. Without it
// only the read time is known.
func stampArrivals(conn net.Conn) bool {
	fd, err := rawFD(conn)
	return err == nil && syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_TIMESTAMPNS, 1) == nil
}

// epollET is EPOLLET as the event mask's bit (syscall has it as a negative int).
const epollET = 1 << 31

// rawFD is the connection's socket; the tool reads it with read(2) while
// Go's netpoller, which also watches it, has no reader waiting.
func rawFD(conn net.Conn) (int, error) {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return 0, errors.New("not a socket")
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return 0, err
	}
	fd := -1
	if err := rc.Control(func(f uintptr) { fd = int(f) }); err != nil {
		return 0, err
	}
	return fd, nil
}

func (p *poller) add(pc *polled) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	// Readiness that is already there is reported at once by the add.
	ev := syscall.EpollEvent{Events: syscall.EPOLLIN | syscall.EPOLLRDHUP | epollET, Fd: int32(pc.fd)}
	if err := syscall.EpollCtl(p.epfd, syscall.EPOLL_CTL_ADD, pc.fd, &ev); err != nil {
		return err
	}
	p.conns[int32(pc.fd)] = pc
	if !p.running {
		p.running = true
		go p.loop()
	}
	return nil
}

func (p *poller) remove(fd int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	syscall.EpollCtl(p.epfd, syscall.EPOLL_CTL_DEL, fd, nil)
	delete(p.conns, int32(fd))
}

func (p *poller) loop() {
	events := make([]syscall.EpollEvent, 256)
	idleSince := time.Time{}
	for {
		n, err := syscall.EpollWait(p.epfd, events, int(pollerIdle/time.Millisecond))
		if err != nil && err != syscall.EINTR {
			panic("vsg-load: epoll_wait: " + err.Error())
		}
		for _, ev := range events[:max(n, 0)] {
			p.mu.Lock()
			pc := p.conns[ev.Fd]
			p.mu.Unlock()
			if pc != nil {
				pc.readable()
			}
		}
		if n > 0 {
			continue
		}
		p.mu.Lock()
		if len(p.conns) > 0 {
			idleSince = time.Time{}
		} else if idleSince.IsZero() {
			idleSince = time.Now()
		} else if time.Since(idleSince) >= pollerIdle {
			p.running = false
			p.mu.Unlock()
			return
		}
		p.mu.Unlock()
	}
}

// readable reads what arrived and parses it, until a short read.
func (pc *polled) readable() {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if pc.ended {
		return
	}
	c := pc.c
	for {
		buf := c.space()
		var n int
		var err error
		if pc.oob == nil {
			n, err = syscall.Read(pc.fd, buf)
		} else {
			var oobn int
			n, oobn, err = pc.recvmsg(buf)
			if err == nil {
				c.arrived = arrival(pc.oob[:oobn])
			}
		}
		switch {
		case err == syscall.EINTR:
			continue
		case err == syscall.EAGAIN:
			return
		case err != nil:
			pc.finish(err)
			return
		case n == 0:
			pc.finish(io.EOF)
			return
		}
		c.in = c.in[:len(c.in)+n]
		if err := c.parse(time.Now().UnixNano(), pc.h); err != nil {
			pc.finish(err)
			return
		}
		if n < len(buf) {
			return
		}
	}
}

// finish ends the reading with err; called with mu held.
func (pc *polled) finish(err error) {
	if pc.ended {
		return
	}
	pc.ended = true
	pc.p.remove(pc.fd)
	pc.done <- err
}

// end ends the reading from outside the poller, waiting for a read or
// handler in progress.
func (pc *polled) end(err error) {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	pc.finish(err)
}
