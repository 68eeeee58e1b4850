package server

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// BenchmarkAuthOverhead is what authentication adds to a request through
// the whole router: the same GET /v1/streams without authentication, with
// an HS256 token, and with an RS256 token from a (cached) JWKS, over the
// same server and store (one stream defined).
func BenchmarkAuthOverhead(b *testing.B) {
	f := newAuthFixture(b)
	// The same server and store, with authentication off.
	verifying := f.authn
	f.authn = &Authenticator{log: f.log}
	insecure := f.Router()
	f.authn = verifying
	for _, c := range []struct {
		name  string
		h     http.Handler
		token string
	}{
		{"no-auth", insecure, ""},
		{"HS256", f.h, f.mint(b, "alice", nil)},
		{"RS256-JWKS", f.h, f.rs256(b, f.claims("alice"))},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			req := httptest.NewRequest("GET", "/v1/streams", nil)
			if c.token != "" {
				req.Header.Set("Authorization", "Bearer "+c.token)
			}
			for i := 0; i < b.N; i++ {
				rec := httptest.NewRecorder()
				c.h.ServeHTTP(rec, req)
				if rec.Code != 200 {
					b.Fatalf("%d %s", rec.Code, rec.Body)
				}
			}
		})
	}
}
