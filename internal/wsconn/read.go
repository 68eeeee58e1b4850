package wsconn

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
// every Config.KeepAlive, are taken here too (a pong handled by the
// library leaves the reader waiting inside it, deep again); the session's
// writer sends the pings (Ping).
//
// The library reads the connection only in Read, on the reading goroutine,
// and in Close (the close handshake, on the writer): before the writer
// closes, StopWaiting takes the reader out of its wait and out of the
// buffer for good (rmu, closing).

// AwaitReadable returns once the library has a message to read: its buffer
// holds bytes that are not a pong, or the socket has data, was closed by
// the client, or failed. It reports stop once the writer closes the
// connection (StopWaiting): the reader is done then. It returns at once
// when the connection is not a socket.
func (c *Conn) AwaitReadable() (stop bool) {
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
func (c *Conn) takeBufferedPong() bool {
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

// StopWaiting takes the reader out of its wait for good, before the
// library reads the close handshake: the library then has the buffer and
// the socket to itself. A reader in the library's Read is left there (the
// library serializes that itself).
func (c *Conn) StopWaiting() {
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
