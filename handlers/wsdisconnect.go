package handlers

import (
	"context"
	"encoding/json"

	"github.com/coder/websocket"

	"github.com/vstream-gateway/vstream-gateway/metrics"
)

// Disconnect is why the gateway closes a WebSocket: a close code in the
// application range (4000-4999) and its reason. Before the close frame
// the client gets a final {"type":"disconnect",…} message with the cursor
// to resume from, because a close reason is limited to 123 bytes and a
// cursor may not fit.
type Disconnect struct {
	Code websocket.StatusCode
	// Reason is the close frame's reason and the message's "reason".
	Reason string
	// Message says it in words.
	Message string
}

// The reasons the gateway closes a WebSocket. openapi.yaml documents them
// (the WebSocket close codes, the Disconnect schema), and
// vsg_ws_disconnects_total counts them by their Reason here.
var (
	// DisconnectBadMessage: the client sent something that is not an ack,
	// or an ack the gateway refused (the reason is then the error's code,
	// such as invalid_cursor). Fix the client; reconnect.
	DisconnectBadMessage = Disconnect{Code: 4000, Reason: "bad_message", Message: `expected {"ack":"<cursor>"} or {"refresh":"<token>"}`}
	// DisconnectShutdown: the gateway is shutting down; reconnect (to
	// another replica) from the disconnect cursor.
	DisconnectShutdown = Disconnect{Code: 4001, Reason: "shutdown", Message: "the gateway is shutting down; reconnect and resume from cursor"}
	// DisconnectSlow: the client read too slowly and its send queue stayed
	// full. Resume from the disconnect cursor.
	DisconnectSlow = Disconnect{Code: 4008, Reason: "slow_consumer", Message: "send queue overflowed; resume from cursor"}
	// DisconnectUpstream: the stream failed upstream (vtgate); the message
	// is the error. Retry after a back-off from the disconnect cursor. A
	// stream that cannot go on (the 409s of a poller: tables_dropped,
	// resume_impossible) closes with this code and that error code as its
	// reason.
	DisconnectUpstream = Disconnect{Code: 4011, Reason: "upstream_failed"}
	// DisconnectRefreshRefused: the client's {"refresh":"<token>"} was
	// refused; the reason is the error's code (unauthorized, forbidden,
	// subscriber_scope_mismatch) and the message says why. The token the
	// connection had is not extended: reconnect from the disconnect cursor
	// with a token that fits.
	DisconnectRefreshRefused = Disconnect{Code: 4003, Reason: "refresh_refused"}
	// DisconnectTokenExpired: the token's exp passed, and no refresh
	// moved it. Reconnect from the disconnect cursor with a fresh token.
	DisconnectTokenExpired = Disconnect{Code: 4010, Reason: "token_expired", Message: "token expired; reconnect with a fresh token and resume from cursor"}
)

// disconnects lists every Disconnect, one per close code.
var disconnects = []Disconnect{DisconnectBadMessage, DisconnectShutdown, DisconnectRefreshRefused, DisconnectSlow,
	DisconnectTokenExpired, DisconnectUpstream}

// withMessage returns d with another message.
func (d Disconnect) withMessage(message string) Disconnect {
	d.Message = message
	return d
}

// label is d's vsg_ws_disconnects_total label: the listed reason of its
// code, so that a refused ack (reason invalid_cursor) counts as
// bad_message.
func (d Disconnect) label() string {
	for _, k := range disconnects {
		if k.Code == d.Code {
			return k.Reason
		}
	}
	return DisconnectBadMessage.Reason
}

// disconnectMessage is the final message. Its members are in the order
// they have always been sent in.
type disconnectMessage struct {
	Code    int    `json:"code"`
	Cursor  string `json:"cursor,omitempty"`
	Message string `json:"message"`
	Reason  string `json:"reason"`
	Type    string `json:"type"`
}

// message is the final {"type":"disconnect",…} message, with the cursor
// to resume from if there is one.
func (d Disconnect) message(cursor *string) []byte {
	m := disconnectMessage{Code: int(d.Code), Message: d.Message, Reason: d.Reason, Type: "disconnect"}
	if cursor != nil {
		m.Cursor = *cursor
	}
	b, _ := json.Marshal(&m)
	return b
}

// closeWith asks the writer to close the connection for d. The first
// reason wins, and is the one counted.
func (ws *wsSession) closeWith(d Disconnect) {
	select {
	case ws.closing <- d:
		metrics.WSDisconnect(d.label())
	default:
	}
}

// finalClose sends the disconnect message with the cursor of the last
// whole transaction written, then the close frame.
func (ws *wsSession) finalClose(d Disconnect) {
	// The library reads the close handshake: the reader's wait ends.
	ws.conn.StopWaiting()
	ctx, cancel := context.WithTimeout(context.Background(), ws.a.WebSocketConfig.GiveUp)
	defer cancel()
	ws.c.Write(ctx, websocket.MessageText, d.message(ws.written.Load()))
	ws.c.Close(d.Code, d.Reason)
}
