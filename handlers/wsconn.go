package handlers

import (
	"bufio"
	"encoding/binary"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// wsConn is the hijacked connection under a WebSocket. The library
// (coder/websocket) does the handshake, reads, and writes control frames
// and the final messages; the writer loop writes data frames here itself.
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
// one call as long as it fits the 4 KiB buffer given to it in Hijack —
// always true of control frames (≤ 131 bytes), which are the only frames it
// writes concurrently with the writer loop (pongs and the close handshake,
// from the reading goroutine). The library's longer messages (the final
// disconnect message) are written by the writer loop itself, after it has
// flushed. Compression must stay disabled: these frames are sent as is.
type wsConn struct {
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
	// it fires when one blocks for longer than it allows (the session's
	// slow-consumer watchdog, see wsSession.watchWrites).
	stalled    *time.Timer
	stallAfter time.Duration
	// hold, set by the waking goroutine's burst (wsSession.writeNow),
	// makes text only buffer: that goroutine must never block on a write.
	hold bool
	// tryWrite is tryFlush's function for raw.Write, made once (a
	// function made per call would be an allocation per write), and
	// tried its result.
	tryWrite func(fd uintptr) bool
	tried    struct {
		n   int
		err error
	}

	// The reading goroutine's wait (awaitReadable): the library's read
	// buffer, and the socket to wait on when that is empty (nil when the
	// connection is not a socket).
	br  *bufio.Reader
	raw syscall.RawConn
	// rmu is held by the reader while it waits or looks at br; closing,
	// once set, keeps it out (stopWaiting); waiting is set during the
	// wait, ponged by every pong the client sends.
	rmu                      sync.Mutex
	closing, waiting, ponged atomic.Bool
}

// armed runs write under the stall watchdog, if there is one.
func (c *wsConn) armed(write func() error) error {
	if c.stalled == nil {
		return write()
	}
	c.stalled.Reset(c.stallAfter)
	err := write()
	c.stalled.Stop()
	return err
}

// wsFlushAt bounds the buffer: past it a burst goes out at once.
const wsFlushAt = 64 << 10

// framePool holds the frame buffers of connections between bursts. A
// buffer that grew past 4*wsFlushAt (one huge batched transaction) is not
// kept. Pointers, so that Put does not allocate.
var framePool = sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}

// takeBuf gives c a pooled buffer when it has none. Called with mu held.
func (c *wsConn) takeBuf() {
	if c.buf == nil {
		c.buf = (*framePool.Get().(*[]byte))[:0]
	}
}

// releaseBuf returns c's empty buffer to the pool. Called with mu held.
func (c *wsConn) releaseBuf() {
	if c.buf == nil {
		return
	}
	if cap(c.buf) <= 4*wsFlushAt {
		b := c.buf[:0]
		framePool.Put(&b)
	}
	c.buf = nil
}

// Write is the library's path to the network. Its frames go out at once
// (a close handshake must not wait for the writer loop), behind the data
// frames already buffered, so a final message never overtakes the events
// before it.
func (c *wsConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(p) > 0 && p[0]&0x0f == 0x8 {
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

// text buffers one text message as a single unmasked frame (servers do not
// mask), sending the buffer first when it is full.
func (c *wsConn) text(payload []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closeSent {
		return net.ErrClosed
	}
	c.takeBuf()
	c.buf = appendFrameHeader(c.buf, 0x1, len(payload))
	if c.hold {
		// Buffered only: the caller (writeNow's burst) must not block.
		c.buf = append(c.buf, payload...)
		return nil
	}
	if len(payload) >= wsFlushAt {
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
	if len(c.buf) >= wsFlushAt {
		return c.flushLocked()
	}
	return nil
}

// tryFlush sends what is buffered as far as the socket takes it now,
// without waiting; what it does not take stays buffered, in order, for the
// writer goroutine's flush. It reports whether the buffer went out whole.
// Why: a tail's append wakes every parked reader at once, and a goroutine
// per reader and write (started, its stack grown, scheduled, ended) cost
// more than the write itself; a socket with room, the usual case, is
// written by the waking goroutine directly (DESIGN §6.1).
func (c *wsConn) tryFlush() (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.buf) == 0 {
		c.releaseBuf()
		return true, nil
	}
	if c.raw == nil || !canWriteNow {
		return false, nil
	}
	if c.tryWrite == nil {
		c.tryWrite = func(fd uintptr) bool {
			c.tried.n, c.tried.err = writeNow(fd, c.buf)
			return true // never wait here
		}
	}
	if err := c.raw.Write(c.tryWrite); err != nil {
		return false, err
	}
	n, werr := c.tried.n, c.tried.err
	c.tried.err = nil
	if werr != nil {
		return false, werr
	}
	if n == len(c.buf) {
		c.buf = c.buf[:0]
		c.releaseBuf()
		return true, nil
	}
	c.buf = c.buf[:copy(c.buf, c.buf[n:])]
	return false, nil
}

// setHold turns text's buffering-only mode on or off.
func (c *wsConn) setHold(on bool) {
	c.mu.Lock()
	c.hold = on
	c.mu.Unlock()
}

// buffered reports how many bytes wait in the buffer.
func (c *wsConn) buffered() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.buf)
}

// flush sends what is buffered.
func (c *wsConn) flush() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.flushLocked()
}

func (c *wsConn) flushLocked() error {
	if len(c.buf) == 0 {
		c.releaseBuf()
		return nil
	}
	err := c.armed(func() error { _, err := c.Conn.Write(c.buf); return err })
	c.buf = c.buf[:0]
	c.releaseBuf()
	return err
}

// giveUpAfter lets writes in progress or to come run for at most d more:
// a writer stuck on a client that stopped reading returns, and a final
// message still gets a chance on a healthy connection.
func (c *wsConn) giveUpAfter(d time.Duration) {
	c.Conn.SetWriteDeadline(time.Now().Add(d))
}

// appendFrameHeader appends a final (FIN) unmasked frame header (RFC 6455
// §5.2) for opcode and a payload of n bytes.
func appendFrameHeader(b []byte, opcode byte, n int) []byte {
	b = append(b, 0x80|opcode)
	switch {
	case n < 126:
		return append(b, byte(n))
	case n <= 0xffff:
		return binary.BigEndian.AppendUint16(append(b, 126), uint16(n))
	default:
		return binary.BigEndian.AppendUint64(append(b, 127), uint64(n))
	}
}

// wsHijacker hands the WebSocket library the hijacked connection wrapped
// in a wsConn.
type wsHijacker struct {
	http.ResponseWriter
	conn *wsConn
}

func (w *wsHijacker) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *wsHijacker) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, brw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	// Anything the server buffered for writing must go out first.
	if err := brw.Writer.Flush(); err != nil {
		conn.Close()
		return nil, nil, err
	}
	w.conn = &wsConn{Conn: conn}
	// The library's buffers live as long as the connection, and an idle
	// connection is the common case, so they are small: the writer's
	// wsLibBuf still keeps each control frame (≤ 131 bytes) one Write (see
	// wsConn), and the reader takes the client's acks and control frames,
	// a few hundred bytes now and then. net/http's 4 KiB reader is kept
	// only when it holds bytes the client sent after its handshake.
	br := brw.Reader
	if br.Buffered() == 0 {
		br = bufio.NewReaderSize(conn, wsLibBuf)
	}
	w.conn.br = br
	if sc, ok := conn.(syscall.Conn); ok {
		if raw, err := sc.SyscallConn(); err == nil {
			w.conn.raw = raw
		}
	}
	return w.conn, bufio.NewReadWriter(br, bufio.NewWriterSize(w.conn, wsLibBuf)), nil
}

// wsLibBuf is the size of the library's read and write buffers.
const wsLibBuf = 256
