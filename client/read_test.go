package client_test

import (
	"testing"

	"github.com/vstream-gateway/vstream-gateway/client"
)

var transports = []client.Transport{client.WebSocket, client.SSE, client.Poll}

// Every transport delivers the same whole transactions, in order, with
// the cursor after each.
func TestReadEveryTransport(t *testing.T) {
	g := startGateway(t)
	for _, tr := range transports {
		t.Run(tr.String(), func(t *testing.T) {
			c := dial(t, g.url, client.WithTransport(tr), client.WithStart("now"))
			before := len(g.log.written())
			g.log.append(20)
			want := g.log.written()[before:]
			got, last := readRows(t, c, want)
			exactlyOnce(t, tr.String(), got, want)
			if last.Cursor == "" {
				t.Fatal("a transaction without a cursor")
			}
			if ch := last.Changes()[0]; ch.Op != client.Insert || ch.Table != "customer" || ch.Keyspace != ks || ch.Shard != "0" || ch.Before != nil || ch.CommitTS.IsZero() {
				t.Fatalf("change %+v", ch)
			}
		})
	}
}
