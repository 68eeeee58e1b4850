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
	"time"
)

// wsConn is a minimal WebSocket client: the upgrade by hand, then frames
// parsed straight off a buffer of what was read. With thousands of
// connections on a two-core machine, a client library's per-message costs
// (contexts, goroutines, copies) would be charged to the server under test;
// this one allocates nothing per message once its buffer has grown to the
// largest message. Its connections are read by a few epoll loops
// (poller_linux.go) rather than a goroutine each: one read(2) per batch of
// frames the server wrote, without the goroutine's wake-up and the
// would-block read after it that Go's netpoller costs.
type wsConn struct {
	conn    net.Conn
	in      []byte // bytes read, parsed up to off
	off     int
	need    int    // the bytes the frame at off needs, when parse stopped inside it
	payload []byte // a fragmented message so far
	// arrived is the kernel's receive time of the last read (Unix ns), or
	// 0 where it is not known: the handler's messages arrived by then.
	arrived int64
	stamped bool       // the kernel stamps arrivals (stampArrivals)
	wmu     sync.Mutex // pongs (the reading side) and commands may interleave

	cmu    sync.Mutex
	pc     *polled // set while a poller reads the connection
	closed bool
}

// minRead is the least free space a read is given.
const minRead = 2048

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
	stamped := stampArrivals(conn)
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
	// Frames that came with the handshake's response are in br.
	c := &wsConn{conn: conn, in: make([]byte, 0, 4096), stamped: stamped}
	early, _ := br.Peek(br.Buffered())
	c.in = append(c.in, early...)
	return c, nil
}

// httpError is a refused upgrade or request.
type httpError struct {
	status int
	body   string
}

func (e *httpError) Error() string { return fmt.Sprintf("HTTP %d: %s", e.status, e.body) }

// handler takes one data message (valid until it returns) with the time it
// was read; an error ends the connection's reading with it. A handler must
// not close the connection it reads (it returns an error instead).
type handler func(msg []byte, now int64) error

// parse takes the complete frames read so far: data messages go to h,
// pings are answered, pongs dropped, a close frame is answered and ends the
// connection with *errClosed. It stops at an incomplete frame, recording
// in need how many bytes that frame takes.
func (c *wsConn) parse(now int64, h handler) error {
	defer c.compact()
	for {
		b := c.in[c.off:]
		if len(b) < 2 {
			c.need = 14
			return nil
		}
		fin, opcode := b[0]&0x80 != 0, b[0]&0x0f
		if b[1]&0x80 != 0 {
			return errors.New("masked frame from the server")
		}
		size, hl := uint64(b[1]&0x7f), 2
		switch size {
		case 126:
			if len(b) < 4 {
				c.need = 4
				return nil
			}
			size, hl = uint64(binary.BigEndian.Uint16(b[2:4])), 4
		case 127:
			if len(b) < 10 {
				c.need = 10
				return nil
			}
			size, hl = binary.BigEndian.Uint64(b[2:10]), 10
		}
		if size > 64<<20 {
			return fmt.Errorf("frame of %d bytes", size)
		}
		if uint64(len(b)-hl) < size {
			c.need = hl + int(size)
			return nil
		}
		p := b[hl : hl+int(size)]
		c.off += hl + int(size)
		switch opcode {
		case 0x9: // ping
			if err := c.write(0xA, p); err != nil {
				return err
			}
			continue
		case 0xA: // pong
			continue
		case 0x8:
			e := &errClosed{code: 1005}
			if len(p) >= 2 {
				e.code, e.reason = int(binary.BigEndian.Uint16(p)), string(p[2:])
			}
			c.write(0x8, p[:min(len(p), 2)])
			return e
		}
		switch {
		case fin && len(c.payload) == 0:
			if err := h(p, now); err != nil {
				return err
			}
		case fin:
			c.payload = append(c.payload, p...)
			err := h(c.payload, now)
			c.payload = c.payload[:0]
			if err != nil {
				return err
			}
		default:
			c.payload = append(c.payload, p...)
		}
	}
}

// compact moves what parse left to the front of the buffer.
func (c *wsConn) compact() {
	n := copy(c.in, c.in[c.off:])
	c.in, c.off = c.in[:n], 0
}

// space is the buffer's free part for the next read: at least minRead
// bytes, and room for the whole frame parse stopped in.
func (c *wsConn) space() []byte {
	if want := max(len(c.in)+minRead, c.need); cap(c.in) < want {
		c.in = slices.Grow(c.in, want-len(c.in))
	}
	return c.in[len(c.in):cap(c.in)]
}

// eachBlocking is each with blocking reads on the connection's goroutine.
func (c *wsConn) eachBlocking(h handler) error {
	now := time.Now().UnixNano()
	for {
		if err := c.parse(now, h); err != nil {
			return err
		}
		n, err := c.conn.Read(c.space())
		now = time.Now().UnixNano()
		c.in = c.in[:len(c.in)+n]
		if err != nil {
			if n > 0 {
				if perr := c.parse(now, h); perr != nil {
					return perr
				}
			}
			return err
		}
	}
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

// close ends the connection; each returns net.ErrClosed if it was
// reading. It waits for a handler that runs on the connection.
func (c *wsConn) close() {
	c.cmu.Lock()
	pc, was := c.pc, c.closed
	c.closed = true
	c.cmu.Unlock()
	if was {
		return
	}
	if pc != nil {
		pc.end(net.ErrClosed)
	}
	c.conn.Close()
}
