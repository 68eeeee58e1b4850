package wsconn

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"syscall"

	"github.com/coder/websocket"
)

// Accept upgrades the request to a WebSocket as websocket.Accept does, on
// a connection the gateway writes its own frames to: the library's
// connection, and the Conn under it. On failure Accept has written the
// HTTP error.
//
// opts is the library's, less two settings that are the frame layer's and
// replaced here: compression stays disabled (frames are sent as they are
// built), and the pongs the library reads mark the client alive for Ping
// (most are taken before the library sees them, AwaitReadable). The
// library's connection refuses messages past cfg.ReadLimit.
func Accept(w http.ResponseWriter, r *http.Request, cfg Config, opts websocket.AcceptOptions) (*websocket.Conn, *Conn, error) {
	hj := &hijacker{ResponseWriter: w}
	// The pong callback lives as long as the connection: it must not hold
	// hj, which holds net/http's request state and 4 KiB buffers.
	var conn *Conn
	opts.CompressionMode = websocket.CompressionDisabled
	opts.OnPongReceived = func(context.Context, []byte) { conn.ponged.Store(true) }
	c, err := websocket.Accept(hj, r, &opts)
	if err != nil {
		return nil, nil, err
	}
	conn = hj.conn
	c.SetReadLimit(cfg.ReadLimit)
	return c, conn, nil
}

// hijacker hands the WebSocket library the hijacked connection wrapped in
// a Conn.
type hijacker struct {
	http.ResponseWriter
	conn *Conn
}

func (w *hijacker) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *hijacker) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, brw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	// Anything the server buffered for writing must go out first.
	if err := brw.Writer.Flush(); err != nil {
		conn.Close()
		return nil, nil, err
	}
	w.conn = &Conn{Conn: conn}
	// The library's buffers live as long as the connection, and an idle
	// connection is the common case, so they are small: the writer's
	// libBuf still keeps each control frame (≤ 131 bytes) one Write (see
	// Conn), and the reader takes the client's acks and control frames,
	// a few hundred bytes now and then. net/http's 4 KiB reader is kept
	// only when it holds bytes the client sent after its handshake.
	br := brw.Reader
	if br.Buffered() == 0 {
		br = bufio.NewReaderSize(conn, libBuf)
	}
	w.conn.br = br
	if sc, ok := conn.(syscall.Conn); ok {
		if raw, err := sc.SyscallConn(); err == nil {
			w.conn.raw = raw
		}
	}
	return w.conn, bufio.NewReadWriter(br, bufio.NewWriterSize(w.conn, libBuf)), nil
}

// libBuf is the size of the library's read and write buffers.
const libBuf = 256
