//go:build !unix

package wsconn

// readable: without a way to look at the socket, the read goes straight to
// the library.
func (c *Conn) readable(uintptr) bool { return true }
