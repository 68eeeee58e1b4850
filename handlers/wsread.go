package handlers

import (
	"time"
)

// The goroutine that reads a WebSocket spends an idle connection's life
// waiting for the client, and what it holds while it waits is its stack.
// Blocked in the library's read, it sits under the library's frames (the
// message reader, the frame header, bufio, the poller) on a stack of 8 KiB
// that the collector never shrinks, since that much of it is in use. So it
// waits for the socket itself, a few frames deep, and calls the library
// only for a message: the collector then shrinks an idle reader's stack to
// 2 KiB (DESIGN §6.1). The keep-alive pongs, which an idle connection gets
// every --keepalive, are taken here too (a pong handled by the library
// leaves the reader waiting inside it, deep again); the writer sends the
// pings (wsSession.keepAliveTurn).
//
// The library reads the connection only in Read, on the reading goroutine,
// and in Close (the close handshake, on the writer): before the writer
// closes, stopWaiting takes the reader out of its wait and out of the
// buffer for good (rmu, closing).

// maxPongFrame is the longest pong a client sends: 2 header bytes, the
// 4-byte mask and at most 125 bytes of payload (RFC 6455 §5.5).
const maxPongFrame = 2 + 4 + 125

// awaitReadable returns once the library has a message to read: its buffer
// holds bytes that are not a pong, or the socket has data, was closed by
// the client, or failed. It reports stop once the writer closes the
// connection: the reader is done then. It returns at once when the
// connection is not a socket.
func (c *wsConn) awaitReadable() (stop bool) {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	for {
		if c.closing.Load() {
			return true
		}
		if c.raw == nil {
			return false
		}
		if c.br.Buffered() > 0 {
			if c.takeBufferedPong() {
				continue
			}
			return false
		}
		c.waiting.Store(true)
		c.raw.Read(c.readable)
		c.waiting.Store(false)
		if c.closing.Load() {
			return true
		}
		// Data, or an error (the socket closed), for the library to read.
		return false
	}
}

// takeBufferedPong consumes a whole pong frame at the head of the
// library's buffer. Called with rmu held.
func (c *wsConn) takeBufferedPong() bool {
	n := c.br.Buffered()
	b, _ := c.br.Peek(min(n, maxPongFrame))
	size, ok := pongFrame(b)
	if !ok {
		return false
	}
	c.br.Discard(size)
	c.ponged.Store(true)
	return true
}

// pongFrame reports the length of the whole masked pong frame b starts
// with, if it does.
func pongFrame(b []byte) (int, bool) {
	if len(b) < 2 || b[0] != 0x8a || b[1]&0x80 == 0 {
		return 0, false
	}
	size := 6 + int(b[1]&0x7f)
	if size > maxPongFrame || len(b) < size {
		return 0, false
	}
	return size, true
}

// stopWaiting takes the reader out of its wait for good, before the
// library reads the close handshake: the library then has the buffer and
// the socket to itself. A reader in the library's Read is left there (the
// library serializes that itself).
func (c *wsConn) stopWaiting() {
	if c.raw == nil {
		return
	}
	c.closing.Store(true)
	if c.waiting.Load() {
		c.Conn.SetReadDeadline(time.Now()) // wakes the poller's wait
	}
	c.rmu.Lock()
	c.Conn.SetReadDeadline(time.Time{})
	c.rmu.Unlock()
}

// ping sends a ping frame, behind what is buffered. Alone, it goes out
// without a pooled buffer: every idle connection pings at once now and
// then, and each would take one.
func (c *wsConn) ping() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closeSent {
		return nil
	}
	if len(c.buf) > 0 {
		c.buf = appendFrameHeader(c.buf, 0x9, 0)
		return c.flushLocked()
	}
	return c.armed(func() error {
		_, err := c.Conn.Write(pingFrame[:])
		return err
	})
}

// pingFrame is a server's ping: unmasked, no payload.
var pingFrame = [2]byte{0x89, 0}
