package server

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/vstream-gateway/vstream-gateway/handlers"
	"github.com/vstream-gateway/vstream-gateway/streams"
	"github.com/vstream-gateway/vstream-gateway/webhook"
)

// TestWebhookAPIMatchesOpenAPI drives every webhook endpoint through the
// real router, success and error paths, and checks each response against
// openapi.yaml (doRequest validates).
func TestWebhookAPIMatchesOpenAPI(t *testing.T) {
	loadSpec(t)
	s, _ := newTestServer(t)
	svc := webhook.NewService(s.store, s.api.Streams, s.hub, webhook.WithLogger(s.log))
	s.wh.api = &handlers.WebhookAPI{API: s.api, Service: svc}
	s.limits = newLimiter(&Config{AdminRate: 1000, AdminBurst: 1000, MaxConnsPerToken: 32})
	h := s.Router()
	ctx := context.Background()

	call := func(method, target, body string, status int, code string) []byte {
		t.Helper()
		req := httptest.NewRequest(method, target, strings.NewReader(body))
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, b := doRequest(t, h, req)
		if resp.StatusCode != status {
			t.Fatalf("%s %s: %d %s, want %d", method, target, resp.StatusCode, b, status)
		}
		if code != "" {
			var e struct{ Error struct{ Code string } }
			json.Unmarshal(b, &e)
			if e.Error.Code != code {
				t.Fatalf("%s %s: code %q, want %q", method, target, e.Error.Code, code)
			}
		}
		return b
	}
	// A snapshot stream: creating its webhooks needs no position from vtgate.
	call("POST", "/v1/streams", `{"name":"hooks","keyspace":"customer","tables":["customer"],"start":"snapshot"}`, 201, "")
	base := "/v1/streams/hooks/webhooks"

	created := call("POST", base, `{"url":"https://93.184.215.14/in","batch_max_events":500,"batch_max_wait":"250ms","max_attempts":20,"timeout":5}`, 201, "")
	var wh struct {
		ID, Secret, State, Timeout, Subscriber string
	}
	if err := json.Unmarshal(created, &wh); err != nil || !strings.HasPrefix(wh.Secret, "whsec_") || wh.State != "active" || wh.Timeout != "5s" {
		t.Fatalf("created %s (%v)", created, err)
	}
	one := base + "/" + wh.ID
	tok, err := s.hub.Token(ctx, &streams.Definition{Name: "hooks", Keyspace: "customer"}, testVGtid())
	if err != nil {
		t.Fatal(err)
	}
	call("POST", base, `{"url":"https://93.184.215.14/b","cursor":"`+tok+`","secret":"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}`, 201, "")

	// Refusals.
	call("POST", base, `{"url":"http://127.0.0.1:8080/in"}`, 400, "webhook_url_forbidden")
	call("POST", base, `{"url":"http://[::1]/in"}`, 400, "webhook_url_forbidden")
	call("POST", base, `{"url":"http://169.254.169.254/latest"}`, 400, "webhook_url_forbidden")
	call("POST", base, `{"url":"ftp://93.184.215.14/"}`, 400, "invalid_webhook")
	call("POST", base, `{"url":"https://93.184.215.14/","max_attempts":0.5}`, 400, "invalid_body")
	call("POST", base, `{"url":"https://93.184.215.14/","batch_max_events":100000}`, 400, "invalid_webhook")
	call("POST", base, `{"url":"https://93.184.215.14/","secret":"hunter2"}`, 400, "invalid_webhook")
	call("POST", base, `{"url":"https://93.184.215.14/","colour":"red"}`, 400, "invalid_body")
	call("POST", base, `{"url":"https://93.184.215.14/","cursor":"nonsense"}`, 400, "invalid_cursor")
	call("POST", base, ``, 400, "invalid_body")
	call("POST", "/v1/streams/nope/webhooks", `{"url":"https://93.184.215.14/"}`, 404, "stream_not_found")

	// Read.
	list := call("GET", base, "", 200, "")
	if strings.Contains(string(list), "whsec_") {
		t.Fatalf("list shows secrets: %s", list)
	}
	call("GET", one, "", 200, "")
	call("GET", base+"/wh_nope", "", 404, "webhook_not_found")
	call("GET", "/v1/streams/nope/webhooks/"+wh.ID, "", 404, "stream_not_found")

	// State changes.
	if b := call("POST", one+"/pause", "", 200, ""); !strings.Contains(string(b), `"state":"paused"`) {
		t.Fatalf("pause: %s", b)
	}
	if b := call("POST", one+"/resume", "", 200, ""); !strings.Contains(string(b), `"state":"active"`) {
		t.Fatalf("resume: %s", b)
	}
	call("POST", base+"/wh_nope/pause", "", 404, "webhook_not_found")
	rot := call("POST", one+"/rotate-secret", "", 200, "")
	if !strings.Contains(string(rot), `"secret":"whsec_`) || !strings.Contains(string(rot), "previous_secrets_expire_at") {
		t.Fatalf("rotate: %s", rot)
	}
	call("POST", one+"/rotate-secret", `{"grace":"1h","secret":"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}`, 200, "")
	call("POST", one+"/rotate-secret", `{"secret":"whsec_c2hvcnQ="}`, 400, "invalid_webhook")
	call("POST", one+"/rotate-secret", `{"grace":"-1s"}`, 400, "invalid_webhook")

	// Dead letters: one recorded the way the deliverer records them, for a
	// receiver that cannot answer within its 100ms timeout (a documentation
	// address on port 1), so a replay fails.
	priv := call("POST", base, `{"url":"https://93.184.215.14:1/c","timeout":"100ms"}`, 201, "")
	var pw struct{ ID string }
	json.Unmarshal(priv, &pw)
	dl, _ := json.Marshal(&webhook.DeadLetter{ID: "msg_x", Events: 1, Cursor: tok, Reason: webhook.ReasonPermanent, Attempts: 1,
		LastStatus: 400, LastError: "HTTP 400", FirstAttemptAt: time.Now(), FailedAt: time.Now(),
		Message: json.RawMessage(`{"type":"changes","id":"msg_x","webhook":"` + pw.ID + `","stream":"hooks","cursor":"` + tok + `","events":[]}`)})
	if _, err := s.store.Append(ctx, "webhook-dlq/"+pw.ID, dl); err != nil {
		t.Fatal(err)
	}
	dls := base + "/" + pw.ID + "/dead-letters"
	if b := call("GET", dls, "", 200, ""); !strings.Contains(string(b), `"seq":1`) {
		t.Fatalf("dead letters: %s", b)
	}
	call("GET", dls+"?limit=1&after=0", "", 200, "")
	call("GET", dls+"?after=x", "", 400, "invalid_after")
	call("GET", dls+"?limit=0", "", 400, "invalid_limit")
	call("POST", dls+"/1/replay", "", 502, "replay_failed")
	call("POST", dls+"/2/replay", "", 404, "dead_letter_not_found")
	call("POST", dls+"/x/replay", "", 404, "dead_letter_not_found")
	call("DELETE", dls, "", 204, "")
	call("GET", base+"/wh_nope/dead-letters", "", 404, "webhook_not_found")

	call("DELETE", one, "", 204, "")
	call("DELETE", one, "", 404, "webhook_not_found")
}

// A server assembled without the webhook service answers 503.
func TestWebhooksUnavailable(t *testing.T) {
	loadSpec(t)
	s, _ := newTestServer(t)
	h := s.Router()
	req := httptest.NewRequest("GET", "/v1/streams/x/webhooks", nil)
	resp, body := doRequest(t, h, req)
	if resp.StatusCode != 503 || !strings.Contains(string(body), "webhooks_unavailable") {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
}
