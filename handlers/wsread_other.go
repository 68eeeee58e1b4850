//go:build !unix

package handlers

// readable: without a way to look at the socket, the read goes straight to
// the library.
func (c *wsConn) readable(uintptr) bool { return true }
