// Package wsconn is the frame layer under the gateway's WebSockets: the
// hijacked connection the library (github.com/coder/websocket) is handed,
// through which the gateway writes its own data frames and pings and on
// which the reading goroutine waits for the client.
//
// Why a layer of its own: the library does the handshake, reads messages,
// answers the client's pings and does the close handshake, but its write
// path costs as much per message as encoding the event, and its read path
// keeps an idle connection's reader deep in its frames. Here a data frame
// is a header and a copy into a buffer that goes out in one system call
// per burst (conn.go, trywrite.go), and the reader waits for the socket a
// few frames deep, taking the keep-alive pongs itself (read.go, DESIGN
// §6.1). The session logic (what to send, when, and why to close) belongs
// to package handlers: this one knows only frames and sockets.
//
// The frame code is raw RFC 6455: unmasked server frames, masked client
// pongs. Compression must stay off (Accept sees to it), since frames are
// sent as they are built.
package wsconn
