package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sync"
)

// wsConn is a minimal WebSocket client: the upgrade by hand, then frames
// parsed straight off a small buffered reader. With thousands of
// connections on a two-core machine, a client library's per-message costs
// (contexts, goroutines, copies) would be charged to the server under test;
// this one allocates nothing per message once its buffer has grown to the
// largest message.
type wsConn struct {
	conn    net.Conn
	br      *bufio.Reader
	payload []byte
	ctl     int        // length of the last control frame's payload, at the end of payload
	wmu     sync.Mutex // pongs (reader goroutine) and commands may interleave
}

// errClosed is returned when the server sent a close frame.
type errClosed struct {
	code   int
	reason string
}

func (e *errClosed) Error() string {
	return fmt.Sprintf("closed by the server: %d %s", e.code, e.reason)
}

// dialWS connects to addr (host:port) and upgrades path, sending header.
func dialWS(ctx context.Context, addr, path string, header http.Header) (*wsConn, error) {
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	// The handshake must not outlive ctx; afterwards reads block until
	// the connection is closed.
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	var key [16]byte
	rand.Read(key[:])
	req := "GET " + path + " HTTP/1.1\r\nHost: " + addr + "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Key: " + base64.StdEncoding.EncodeToString(key[:]) + "\r\nSec-WebSocket-Version: 13\r\n"
	for k, vs := range header {
		for _, v := range vs {
			req += k + ": " + v + "\r\n"
		}
	}
	if _, err := io.WriteString(conn, req+"\r\n"); err != nil {
		conn.Close()
		return nil, err
	}
	br := bufio.NewReaderSize(conn, 4096)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		conn.Close()
		return nil, err
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		conn.Close()
		return nil, &httpError{status: resp.StatusCode, body: string(b)}
	}
	if ctx.Err() != nil {
		conn.Close()
		return nil, ctx.Err()
	}
	return &wsConn{conn: conn, br: br, payload: make([]byte, 0, 1024)}, nil
}

// httpError is a refused upgrade or request.
type httpError struct {
	status int
	body   string
}

func (e *httpError) Error() string { return fmt.Sprintf("HTTP %d: %s", e.status, e.body) }

// next returns the next data message. Pings are answered; a close frame
// ends the connection with *errClosed. The returned slice is valid until
// the next call.
func (c *wsConn) next() ([]byte, error) {
	c.payload = c.payload[:0]
	for {
		fin, opcode, err := c.frame()
		if err != nil {
			return nil, err
		}
		switch opcode {
		case 0x9: // ping: the control payload was appended last; split it off
			n := len(c.payload) - c.ctl
			ping := append([]byte(nil), c.payload[n:]...)
			c.payload = c.payload[:n]
			if err := c.write(0xA, ping); err != nil {
				return nil, err
			}
			continue
		case 0xA:
			c.payload = c.payload[:len(c.payload)-c.ctl]
			continue
		case 0x8:
			p := c.payload[len(c.payload)-c.ctl:]
			e := &errClosed{code: 1005}
			if len(p) >= 2 {
				e.code, e.reason = int(binary.BigEndian.Uint16(p)), string(p[2:])
			}
			c.write(0x8, p[:min(len(p), 2)])
			return nil, e
		}
		if fin {
			return c.payload, nil
		}
	}
}

// frame reads one frame, appending its payload to c.payload; for control
// frames c.ctl is the payload's length.
func (c *wsConn) frame() (fin bool, opcode byte, err error) {
	var hdr [8]byte
	if _, err := io.ReadFull(c.br, hdr[:2]); err != nil {
		return false, 0, err
	}
	fin, opcode = hdr[0]&0x80 != 0, hdr[0]&0x0f
	if hdr[1]&0x80 != 0 {
		return false, 0, errors.New("masked frame from the server")
	}
	size := uint64(hdr[1] & 0x7f)
	switch size {
	case 126:
		if _, err := io.ReadFull(c.br, hdr[:2]); err != nil {
			return false, 0, err
		}
		size = uint64(binary.BigEndian.Uint16(hdr[:2]))
	case 127:
		if _, err := io.ReadFull(c.br, hdr[:8]); err != nil {
			return false, 0, err
		}
		size = binary.BigEndian.Uint64(hdr[:8])
	}
	if size > 64<<20 {
		return false, 0, fmt.Errorf("frame of %d bytes", size)
	}
	n := len(c.payload)
	c.payload = slices.Grow(c.payload, int(size))[:n+int(size)]
	if _, err := io.ReadFull(c.br, c.payload[n:]); err != nil {
		return false, 0, err
	}
	c.ctl = int(size)
	return fin, opcode, nil
}

// writeText sends one text message.
func (c *wsConn) writeText(b []byte) error { return c.write(0x1, b) }

// write sends one frame, masked as clients must.
func (c *wsConn) write(opcode byte, p []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	buf := make([]byte, 0, 14+len(p))
	buf = append(buf, 0x80|opcode)
	switch {
	case len(p) < 126:
		buf = append(buf, 0x80|byte(len(p)))
	case len(p) < 1<<16:
		buf = append(buf, 0x80|126)
		buf = binary.BigEndian.AppendUint16(buf, uint16(len(p)))
	default:
		buf = append(buf, 0x80|127)
		buf = binary.BigEndian.AppendUint64(buf, uint64(len(p)))
	}
	var mask [4]byte
	rand.Read(mask[:])
	buf = append(buf, mask[:]...)
	for i, b := range p {
		buf = append(buf, b^mask[i&3])
	}
	_, err := c.conn.Write(buf)
	return err
}

func (c *wsConn) close() { c.conn.Close() }
