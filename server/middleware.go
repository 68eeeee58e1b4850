package server

// Middleware order (router.go): recover, access log, metrics, CORS (answers
// preflights and checks WebSocket origins before any token is needed),
// authentication (puts the principal in the context), then per route:
// stream scope, admin scope plus the admin rate limit, subscriber binding,
// and the per-token connection limit on the streaming transports.

// authenticator returns the server's authenticator. A Server assembled
// without New (tests of the HTTP layer) has none and serves as with
// --insecure-no-auth; New always sets one, and the configuration refuses to
// start without authentication unless that flag is given.
func (s *Server) authenticator() *Authenticator {
	if s.authn == nil {
		s.authn = &Authenticator{log: s.log}
	}
	return s.authn
}

func (s *Server) limiter() *Limiter {
	if s.limits == nil {
		s.limits = defaultLimiter()
	}
	return s.limits
}

func (s *Server) corsPolicy() *CORS {
	if s.cors == nil {
		s.cors = newCORS(nil)
	}
	return s.cors
}
