package handlers

import (
	"errors"
	"net/http"
	"time"

	"github.com/vstream-gateway/vstream-gateway/auth"
	"github.com/vstream-gateway/vstream-gateway/hub"
	"github.com/vstream-gateway/vstream-gateway/metrics"
)

// A WebSocket outlives the handshake that checked its token: without more,
// a client would read for days on a token that expired in minutes. So the
// session closes at the token's exp (4010 token_expired, after the last
// whole transaction written: the disconnect cursor resumes exactly), unless
// the client sent a fresh token before it: {"refresh":"<token>"}, the same
// shape as an ack. A refresh is verified as the handshake's token was and
// must continue the same connection: the same subject, the stream and the
// named subscriber still covered, and the same table scope on the stream
// (a named subscriber is bound to it, hub/subscope.go) or, for a client
// without a subscriber, a narrower one, applied from the next transaction
// on. A wider scope is refused: rows the connection withheld are behind
// its cursor. A refused refresh closes the connection (4003, the reason
// the error's code): the client cannot go on with a token it was told is
// not good, and the old one is not extended.

// armExpiry starts the timer of the token's expiry. Without a principal
// (handlers on their own) or with authentication off nothing expires.
func (ws *wsSession) armExpiry() {
	p := auth.FromContext(ws.base)
	ws.principal = p
	if p == nil || p.Anonymous || p.Expires.IsZero() {
		return
	}
	ws.expiry = time.AfterFunc(time.Until(p.Expires), func() {
		ws.closeWith(DisconnectTokenExpired)
		ws.cancel()
	})
}

// stopExpiry stops the expiry timer when the session ends.
func (ws *wsSession) stopExpiry() {
	if ws.expiry != nil {
		ws.expiry.Stop()
	}
}

// refresh answers a client's refresh message, on the reading goroutine
// (the only one that reads or sets ws.principal after start). It reports
// false when it refused the token: the session is closing then.
func (ws *wsSession) refresh(token string) bool {
	if ws.a.Verify == nil || ws.expiry == nil {
		return true // authentication is off: nothing expires
	}
	p, err := ws.a.Verify(ws.base, token)
	if err != nil {
		ae := &auth.Error{Reason: auth.ReasonUnverifiable, Err: err}
		errors.As(err, &ae)
		metrics.AuthFailure(ae.Reason)
		return ws.refuseRefresh(apiErr(http.StatusUnauthorized, "unauthorized", ae.Message()))
	}
	if e := ws.refreshAllowed(p); e != nil {
		return ws.refuseRefresh(e)
	}
	if ws.sub == "" {
		ws.o.tables.Store(p.TableFilter()) // the same or narrower
	}
	ws.principal = p
	ws.expiry.Reset(time.Until(p.Expires))
	return true
}

// refreshAllowed reports why p cannot continue the connection, if it
// cannot.
func (ws *wsSession) refreshAllowed(p *auth.Principal) *Error {
	old, name := ws.principal, ws.def.Name
	switch {
	case p.Subject != old.Subject:
		return apiErr(http.StatusForbidden, "forbidden", "the token's subject "+quoteJSON(p.Subject)+
			" is not the connection's "+quoteJSON(old.Subject)+": a refresh goes on as the same client")
	case !p.MayReadStream(name):
		return apiErr(http.StatusForbidden, "forbidden", "the token's streams claim does not cover stream "+quoteJSON(name))
	case ws.sub != "" && !p.MayUseSubscriber(ws.sub):
		return apiErr(http.StatusForbidden, "forbidden", "subscriber "+quoteJSON(ws.sub)+" is not bound to the token")
	}
	was, now := scopeOf(ws.def, old), scopeOf(ws.def, p)
	if ws.sub != "" && !now.Equal(was) {
		me := &hub.ScopeMismatchError{Subscriber: ws.sub, Stored: was, Given: now}
		return apiErr(http.StatusConflict, "subscriber_scope_mismatch", me.Error())
	}
	if !now.Within(was) {
		return apiErr(http.StatusForbidden, "forbidden", "the token's table scope on the stream, "+now.String()+
			", is wider than the connection's, "+was.String()+": rows the connection withheld are behind its cursor")
	}
	return nil
}

// refuseRefresh closes the session for a refused refresh.
func (ws *wsSession) refuseRefresh(e *Error) bool {
	ws.closeWith(Disconnect{Code: DisconnectRefreshRefused.Code, Reason: e.Code, Message: e.Message})
	ws.cancel()
	return false
}
