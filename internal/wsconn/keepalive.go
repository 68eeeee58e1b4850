package wsconn

import "errors"

// ErrNoPong: the client did not answer the last ping by the next one. It
// is gone (a dropped NAT mapping, a closed laptop) without a close frame.
var ErrNoPong = errors.New("websocket client did not answer a ping")

// Ping checks that the client answered the previous ping, then sends the
// next, behind what is buffered; the caller pings every Config.KeepAlive.
// The library answers the client's pings, and the gateway sends its own,
// so that a client gone without a word is noticed: Ping reports
// ErrNoPong then. After the library's close frame it sends nothing.
//
// Alone, the ping goes out without a pooled buffer: every idle connection
// pings at once now and then, and each would take one.
func (c *Conn) Ping() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pinged && !c.ponged.Load() {
		return ErrNoPong
	}
	c.ponged.Store(false)
	c.pinged = true
	if c.closeSent {
		return nil
	}
	if len(c.buf) > 0 {
		c.buf = appendFrameHeader(c.buf, opPing, 0)
		return c.flushLocked()
	}
	return c.armed(func() error {
		_, err := c.Conn.Write(pingFrame[:])
		return err
	})
}
