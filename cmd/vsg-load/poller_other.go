//go:build !linux

package main

import "net"

// each calls h with every data message until the connection ends, and
// returns why it ended (net.ErrClosed after close). Elsewhere than on
// Linux the connection's goroutine reads it.
func (c *wsConn) each(h handler) error { return c.eachBlocking(h) }

// stampArrivals is Linux's (poller_linux.go): no arrival times here.
func stampArrivals(net.Conn) bool { return false }

// polled is Linux's (poller_linux.go).
type polled struct{}

func (*polled) end(error) {}
