//go:build unix

package wsconn

import "syscall"

// writeNow writes as much of b as the socket takes without waiting: the
// bytes written, and an error other than "would block".
func writeNow(fd uintptr, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		m, err := syscall.Write(int(fd), b[n:])
		switch {
		case err == syscall.EINTR:
			continue
		case err == syscall.EAGAIN || err == syscall.EWOULDBLOCK:
			return n, nil
		case err != nil:
			return n, err
		case m == 0:
			return n, nil
		}
		n += m
	}
	return n, nil
}

// canWriteNow: this platform can try a write without waiting.
const canWriteNow = true
