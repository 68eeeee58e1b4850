package server

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/vstream-gateway/vstream-gateway/handlers"
	"github.com/vstream-gateway/vstream-gateway/metrics"
)

// CORS lets dashboards on other origins use the API, and checks the
// Origin of WebSocket handshakes (browsers apply no same-origin policy to
// WebSockets, so the server must).
//
// Tokens travel in headers, the subprotocol or the query, never cookies,
// so no credentials mode is needed and "*" is safe to offer.
type CORS struct {
	any     bool
	origins map[string]bool
}

func newCORS(origins []string) *CORS {
	c := &CORS{origins: map[string]bool{}}
	for _, o := range origins {
		if o == "*" {
			c.any = true
			continue
		}
		c.origins[strings.TrimSuffix(strings.ToLower(o), "/")] = true
	}
	return c
}

func (c *CORS) allowed(origin string) bool {
	return c.any || c.origins[strings.ToLower(origin)]
}

// sameOrigin reports whether origin names the host the request was sent
// to (the dashboard served by the gateway itself).
func sameOrigin(r *http.Request, origin string) bool {
	u, err := url.Parse(origin)
	return err == nil && u.Host != "" && strings.EqualFold(u.Host, r.Host)
}

const (
	corsAllowHeaders  = "Authorization, Content-Type, Accept, Last-Event-ID"
	corsExposeHeaders = "Vsg-Next-Cursor, Vsg-Up-To-Date, Retry-After, WWW-Authenticate"
	corsMethods       = "GET, POST, DELETE"
)

func (c *CORS) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		if origin == "" {
			next.ServeHTTP(w, r) // not a browser cross-origin request
			return
		}
		ok := c.allowed(origin) || sameOrigin(r, origin)
		if strings.EqualFold(r.Header.Get("Upgrade"), "websocket") && !ok {
			metrics.Refused("origin")
			handlers.WriteError(w, nil, &handlers.Error{Status: http.StatusForbidden, Code: "forbidden", Message: "origin " + quoteName(origin) + " may not open WebSockets here (see --cors-origins)"})
			return
		}
		h := w.Header()
		h.Add("Vary", "Origin")
		preflight := r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != ""
		if ok {
			h.Set("Access-Control-Allow-Origin", origin)
			h.Set("Access-Control-Expose-Headers", corsExposeHeaders)
		}
		if preflight {
			// Answered here, before authentication: browsers send no
			// Authorization header on a preflight.
			if ok {
				h.Set("Access-Control-Allow-Methods", corsMethods)
				h.Set("Access-Control-Allow-Headers", corsAllowHeaders)
				h.Set("Access-Control-Max-Age", "600")
			}
			w.WriteHeader(http.StatusNoContent)
			return
		}
		next.ServeHTTP(w, r)
	})
}
