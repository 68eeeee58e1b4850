//go:build unix

package wsconn

import "syscall"

// readable reports whether the library's read would not block (the socket
// has data other than a pong, the client closed it, or it failed); false
// makes the poller wait for the socket and ask again. Pongs at the head of
// the socket are taken. It looks at the socket without taking from it, and
// the poller waits only for what comes after its wait began: what is there
// already is never waited for.
func (c *Conn) readable(fd uintptr) bool {
	var b [maxPongFrame]byte
	for {
		if c.closing.Load() {
			return true
		}
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		switch {
		case err == syscall.EINTR:
			continue
		case err == syscall.EAGAIN || err == syscall.EWOULDBLOCK:
			return false
		case err != nil || n == 0:
			return true
		}
		size, ok := pongFrame(b[:n])
		if !ok {
			return true
		}
		if _, _, err := syscall.Recvfrom(int(fd), b[:size], syscall.MSG_DONTWAIT); err != nil {
			return true
		}
		c.ponged.Store(true)
	}
}
