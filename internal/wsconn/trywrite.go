package wsconn

// TryFlush sends what is buffered as far as the socket takes it now,
// without waiting; what it does not take stays buffered, in order, for a
// later Flush. It reports whether the buffer went out whole.
// Why: a tail's append wakes every parked reader at once, and a goroutine
// per reader and write (started, its stack grown, scheduled, ended) cost
// more than the write itself; a socket with room, the usual case, is
// written by the waking goroutine directly (DESIGN §6.1).
func (c *Conn) TryFlush() (bool, error) {
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

// CanWriteNow reports whether TryFlush can send anything: the connection
// is a socket, on a platform that can try a write without waiting. When
// it cannot, every write is a blocking Flush.
func (c *Conn) CanWriteNow() bool { return c.raw != nil && canWriteNow }
