package client_test

import (
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/vstream-gateway/vstream-gateway/client"
)

// urls records the query of every /changes request.
type urls struct {
	mu      sync.Mutex
	queries []map[string][]string
}

func (u *urls) RoundTrip(req *http.Request) (*http.Response, error) {
	u.mu.Lock()
	u.queries = append(u.queries, req.URL.Query())
	u.mu.Unlock()
	return http.DefaultTransport.RoundTrip(req)
}

// A polling client passes each page's Vsg-Scope and Vsg-Interval back as
// scope= and interval=, the URL a cache in front of the gateway keeps
// pages under, and reads every row once as before.
func TestPollAddressesPagesForCaches(t *testing.T) {
	g := startGateway(t, "--pull-cache")
	rec := &urls{}
	c := dial(t, g.url, client.WithTransport(client.Poll), client.WithStart("now"), client.WithPoll(time.Second, 100),
		client.WithHTTPClient(&http.Client{Transport: rec}))
	before := len(g.log.written())
	g.log.append(5)
	want := g.log.written()[before:]
	got, _ := readRows(t, c, want)
	exactlyOnce(t, "polled", got, want)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.queries) < 2 {
		t.Fatalf("%d polls", len(rec.queries))
	}
	if q := rec.queries[0]; q["scope"] != nil || q["interval"] != nil {
		t.Errorf("the first poll named a scope or interval before any page: %v", q)
	}
	for i, q := range rec.queries[1:] {
		if len(q["scope"]) != 1 || len(q["scope"][0]) != 16 || len(q["interval"]) != 1 {
			t.Errorf("poll %d without the page's scope and interval: %v", i+1, q)
		}
	}
}
