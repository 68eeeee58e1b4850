package auth

import (
	"net/http"
	"strings"
)

// Where a token was found.
const (
	SourceHeader      = "header"
	SourceSubprotocol = "subprotocol"
	SourceQuery       = "query"
)

// SubprotocolPrefix marks the WebSocket subprotocol that carries a token:
// browsers cannot set headers on a WebSocket, so a client offers
// `Sec-WebSocket-Protocol: vsg.v1, bearer.<token>` and the server answers
// with vsg.v1 only (a JWT's characters are all valid in a subprotocol).
const SubprotocolPrefix = "bearer."

// TokenFromRequest returns the token a request carries and where it was
// found: the Authorization header, then the WebSocket subprotocol, then the
// access_token query parameter (the browser fallback for EventSource; it is
// never logged: the access log records the path only). An Authorization
// header that is not a Bearer token is malformed, not absent: falling
// through to another source would hide a client bug.
func TokenFromRequest(r *http.Request) (token, source string, err error) {
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, tok, ok := strings.Cut(h, " ")
		tok = strings.TrimSpace(tok)
		if !ok || !strings.EqualFold(scheme, "Bearer") || tok == "" {
			return "", SourceHeader, &Error{Reason: ReasonMalformed, Err: errNotBearer}
		}
		return tok, SourceHeader, nil
	}
	for _, h := range r.Header.Values("Sec-WebSocket-Protocol") {
		for _, p := range strings.Split(h, ",") {
			p = strings.TrimSpace(p)
			if len(p) > len(SubprotocolPrefix) && strings.EqualFold(p[:len(SubprotocolPrefix)], SubprotocolPrefix) {
				return p[len(SubprotocolPrefix):], SourceSubprotocol, nil
			}
		}
	}
	if tok := r.URL.Query().Get("access_token"); tok != "" {
		return tok, SourceQuery, nil
	}
	return "", "", &Error{Reason: ReasonMissing, Err: ErrNoToken}
}

var errNotBearer = &claimError{"Authorization must be \"Bearer <token>\""}
