package server

import (
	"context"
)

// shutdown closes the streaming clients and stops serving, within ctx:
//
//   - API.Shutdown is closed: each WebSocket gets a final disconnect
//     message with the cursor of its last whole transaction and close code
//     4001; each SSE stream ends (the browser resumes with Last-Event-ID);
//   - http.Server.Shutdown stops accepting, and waits for in-flight pulls,
//     acks and the SSE streams;
//   - hijacked WebSockets are not tracked by http.Server, so the limiter's
//     count of streaming handlers is waited for too.
func (s *Server) shutdown(ctx context.Context) error {
	if s.closeStreams != nil {
		s.closeStreams()
	}
	s.http.SetKeepAlivesEnabled(false)
	err := s.http.Shutdown(ctx)
	if s.limits != nil {
		if werr := s.limits.wait(ctx); err == nil {
			err = werr
		}
	}
	return err
}
