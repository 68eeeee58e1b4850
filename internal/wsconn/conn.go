package wsconn

import (
	"bufio"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Conn is the hijacked connection under a WebSocket. The library
// (coder/websocket) does the handshake, reads, and writes control frames
// and the final messages; the session's writer writes data frames here
// itself.
//
// Why: the library's Conn.Write costs about as much per message as
// encoding the event (a lock, context and deadline set-up, a frame through
// a 4 KiB buffer and a flush), and a replaying client receives hundreds of
// thousands of messages a second. Here a data frame is a header and a copy
// into a buffer that goes out in one system call per burst.
//
// Frames never interleave: every write, ours and the library's, happens
// under mu, and each is whole. The library flushes its buffered writer at
// the end of every frame it writes, so each of its frames reaches Write in
// one call as long as it fits the buffer given to it in Hijack (libBuf) —
// always true of control frames (≤ 131 bytes), which are the only frames it
// writes concurrently with the session's writer (pongs and the close
// handshake, from the reading goroutine). The library's longer messages
// (the final disconnect message) are written by the session's writer
// itself, after it has flushed. Compression must stay disabled: these
// frames are sent as is.
type Conn struct {
	net.Conn
	mu sync.Mutex
	// buf holds the frames not yet sent, in order. It is taken from
	// framePool by the first frame of a burst and given back once sent:
	// an idle connection, the usual state of a dashboard's, holds none.
	buf []byte
	// closeSent: the library has written a close frame, after which the
	// protocol allows no data frames (RFC 6455 §5.5.1). Each of its control
	// frames is one Write, so the frame's first byte is p[0]; the only
	// library message that may span Writes is the final disconnect
	// message, after which nothing is sent anyway.
	closeSent bool
	// stalled, when set, is armed for the length of every data write:
	// it fires when one blocks for longer than it allows (WatchWrites).
	stalled    *time.Timer
	stallAfter time.Duration
	// hold, set by a burst that must not block (SetHold), makes Text only
	// buffer.
	hold bool
	// tryWrite is TryFlush's function for raw.Write, made once (a
	// function made per call would be an allocation per write), and
	// tried its result.
	tryWrite func(fd uintptr) bool
	tried    struct {
		n   int
		err error
	}
	// pinged: a ping was sent (Ping), and the client owes its pong.
	pinged bool

	// The reading goroutine's wait (AwaitReadable): the library's read
	// buffer, and the socket to wait on when that is empty (nil when the
	// connection is not a socket).
	br  *bufio.Reader
	raw syscall.RawConn
	// rmu is held by the reader while it waits or looks at br; closing,
	// once set, keeps it out (StopWaiting); waiting is set during the
	// wait, ponged by every pong the client sends.
	rmu                      sync.Mutex
	closing, waiting, ponged atomic.Bool
}

// New wraps c for writing frames only, as Accept's connection does but
// without the library's reader: the reader's wait returns at once, and
// writes never try the socket without waiting (CanWriteNow is false). For
// code that frames messages without a handshake: tests and benchmarks.
func New(c net.Conn) *Conn { return &Conn{Conn: c} }

// armed runs write under the stall watchdog, if there is one.
func (c *Conn) armed(write func() error) error {
	if c.stalled == nil {
		return write()
	}
	c.stalled.Reset(c.stallAfter)
	err := write()
	c.stalled.Stop()
	return err
}

// WatchWrites calls stalled, on a goroutine of its own, when one data
// write blocks for longer than after; the write itself goes on. Why: a
// client that stops reading shows otherwise only as a full send queue, and
// a session with nothing to queue would wait on the socket for good. One
// timer per connection, reused by every write. It returns the watchdog's
// stop.
func (c *Conn) WatchWrites(after time.Duration, stalled func()) (stop func() bool) {
	t := time.AfterFunc(time.Hour, stalled)
	t.Stop()
	c.mu.Lock()
	c.stalled, c.stallAfter = t, after
	c.mu.Unlock()
	return t.Stop
}

// FlushAt bounds the buffer: past it a burst goes out at once. A session
// writing a burst without blocking (SetHold) stops adding to it there.
const FlushAt = 64 << 10

// framePool holds the frame buffers of connections between bursts. A
// buffer that grew past 4*FlushAt (one huge batched transaction) is not
// kept. Pointers, so that Put does not allocate.
var framePool = sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}

// takeBuf gives c a pooled buffer when it has none. Called with mu held.
func (c *Conn) takeBuf() {
	if c.buf == nil {
		c.buf = (*framePool.Get().(*[]byte))[:0]
	}
}

// releaseBuf returns c's empty buffer to the pool. Called with mu held.
func (c *Conn) releaseBuf() {
	if c.buf == nil {
		return
	}
	if cap(c.buf) <= 4*FlushAt {
		b := c.buf[:0]
		framePool.Put(&b)
	}
	c.buf = nil
}

// Write is the library's path to the network. Its frames go out at once
// (a close handshake must not wait for the session's writer), behind the
// data frames already buffered, so a final message never overtakes the
// events before it.
func (c *Conn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(p) > 0 && p[0]&0x0f == opClose {
		c.closeSent = true
	}
	if len(c.buf) == 0 {
		c.releaseBuf()
		return c.Conn.Write(p)
	}
	c.buf = append(c.buf, p...)
	if err := c.flushLocked(); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Text buffers one text message as a single unmasked frame (servers do not
// mask), sending the buffer first when it is full. After the library's
// close frame it reports net.ErrClosed: no data frame may follow it.
func (c *Conn) Text(payload []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closeSent {
		return net.ErrClosed
	}
	c.takeBuf()
	c.buf = appendFrameHeader(c.buf, opText, len(payload))
	if c.hold {
		// Buffered only: the caller (a burst under SetHold) must not block.
		c.buf = append(c.buf, payload...)
		return nil
	}
	if len(payload) >= FlushAt {
		// A big message (a batched transaction) is not copied: the buffer
		// and it go out in one writev (which consumes the slice header
		// it is given, not c.buf).
		bufs := net.Buffers{c.buf, payload}
		err := c.armed(func() error { _, err := bufs.WriteTo(c.Conn); return err })
		c.buf = c.buf[:0]
		c.releaseBuf()
		return err
	}
	c.buf = append(c.buf, payload...)
	if len(c.buf) >= FlushAt {
		return c.flushLocked()
	}
	return nil
}

// SetHold turns Text's buffering-only mode on or off: a goroutine that
// must never block on a write (the one that woke a parked session) frames
// its burst with hold on, then sends it with TryFlush.
func (c *Conn) SetHold(on bool) {
	c.mu.Lock()
	c.hold = on
	c.mu.Unlock()
}

// Buffered reports how many bytes wait in the buffer.
func (c *Conn) Buffered() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.buf)
}

// Flush sends what is buffered, blocking (under the stall watchdog) until
// the socket has taken it.
func (c *Conn) Flush() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.flushLocked()
}

func (c *Conn) flushLocked() error {
	if len(c.buf) == 0 {
		c.releaseBuf()
		return nil
	}
	err := c.armed(func() error { _, err := c.Conn.Write(c.buf); return err })
	c.buf = c.buf[:0]
	c.releaseBuf()
	return err
}

// GiveUpAfter lets writes in progress or to come run for at most d more
// (Config.GiveUp): a writer stuck on a client that stopped reading
// returns, and a final message still gets a chance on a healthy
// connection.
func (c *Conn) GiveUpAfter(d time.Duration) {
	c.Conn.SetWriteDeadline(time.Now().Add(d))
}
