// Command vsg-centrifugo-pub is the other side of the fan-out comparison:
// what a team would put in front of its own VStream consumer. It reads a
// keyspace with one plain VStream (the gateway's source package, so each
// row becomes the same event JSON the gateway sends: cursor and txn_end
// included) and publishes every event to a Centrifugo channel through
// Centrifugo's HTTP server API, which fans it out to the channel's
// WebSocket subscribers and keeps it in the channel's history for
// recovery. Whatever is ready when a request goes out is sent in one
// /api/batch request (sequential, so order is kept); a lone event in one
// /api/publish.
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/vstream-gateway/vstream-gateway/cursor"
	"github.com/vstream-gateway/vstream-gateway/source"
	"github.com/vstream-gateway/vstream-gateway/streams"
)

type config struct {
	vtgate, keyspace, tables, stream string
	api, apiKey, channel             string
	maxBatch                         int
	readyFile                        string
}

func main() {
	var c config
	fs := flag.NewFlagSet("vsg-centrifugo-pub", flag.ExitOnError)
	fs.StringVar(&c.vtgate, "vtgate", "localhost:15991", "vtgate gRPC address")
	fs.StringVar(&c.keyspace, "keyspace", "customer", "keyspace to stream")
	fs.StringVar(&c.tables, "tables", "customer", "comma-separated tables")
	fs.StringVar(&c.stream, "stream", "load", "stream name the cursors are bound to (as the gateway's)")
	fs.StringVar(&c.api, "api", "http://127.0.0.1:8000/api", "Centrifugo server API")
	fs.StringVar(&c.apiKey, "api-key", os.Getenv("VSG_CENTRIFUGO_API_KEY"), "Centrifugo http_api.key (env VSG_CENTRIFUGO_API_KEY)")
	fs.StringVar(&c.channel, "channel", "load", "Centrifugo channel")
	fs.IntVar(&c.maxBatch, "max-batch", 1000, "most events per /api/batch request")
	fs.StringVar(&c.readyFile, "ready-file", "", "file created once the VStream has reported its position (for scripts that wait for it)")
	fs.Parse(os.Args[1:])
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := loopbackOnly(c.api, c.vtgate); err != nil {
		log.Error("refused", "err", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, c, log); err != nil && ctx.Err() == nil {
		log.Error("publisher failed", "err", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, c config, log *slog.Logger) error {
	cl, err := source.Dial(ctx, c.vtgate, source.WithLogger(log))
	if err != nil {
		return err
	}
	defer cl.Close()
	def := streams.Definition{Name: c.stream, Keyspace: c.keyspace, Tables: strings.Split(c.tables, ",")}
	r := cl.Open(ctx, source.Spec{Keyspace: c.keyspace, Rules: def.VitessRules(), Name: c.stream}, source.NowPosition(c.keyspace))
	defer r.Close()
	// Cursors signed as the gateway signs them, so that the published
	// events are the gateway's, byte for byte in shape and size.
	key := make([]byte, 32)
	rand.Read(key)
	codec, err := cursor.NewCodec(key, nil)
	if err != nil {
		return err
	}
	// A publish that times out may have been made: the retry carries the
	// same idempotency key, so Centrifugo does not publish it twice. The
	// timeout is long because an overloaded Centrifugo answers a batch
	// late, and each retry of a batch made it do the work again.
	runID := make([]byte, 6)
	rand.Read(runID)
	p := &publisher{c: c, log: log, hc: &http.Client{Timeout: time.Minute}, keyPrefix: hex.EncodeToString(runID) + "-"}
	p.channelJSON, _ = json.Marshal(c.channel)
	log.Info("publishing", "keyspace", c.keyspace, "tables", c.tables, "channel", c.channel, "api", c.api)
	for ready := false; ; {
		txn, err := r.Next(ctx)
		if err != nil {
			return err
		}
		if !ready && c.readyFile != "" {
			// vtgate reports the current position first: from here on
			// every commit is published.
			if err := os.WriteFile(c.readyFile, nil, 0o644); err != nil {
				return err
			}
			ready = true
		}
		for {
			if err := p.add(ctx, codec, txn); err != nil {
				return err
			}
			if p.n >= c.maxBatch {
				break
			}
			var ok bool
			if txn, ok, err = r.TryNext(); err != nil {
				return err
			} else if !ok {
				break
			}
		}
		if err := p.flush(ctx); err != nil {
			return err
		}
	}
}

// publisher accumulates publish commands and sends them.
type publisher struct {
	c           config
	log         *slog.Logger
	hc          *http.Client
	channelJSON []byte
	body        []byte // {"commands":[…]} under construction, or one publish
	first       []byte // the single event, when n == 1
	n           int
	ev          []byte
	published   int64
	keyPrefix   string // this run's, before each event's number in its idempotency key
	key         []byte // the idempotency key of the event being added
	firstKey    []byte // the single event's, when n == 1
}

// add appends the events of txn, each with the transaction's cursor and
// the last one marked txn_end, as the gateway's WebSocket sends them.
func (p *publisher) add(ctx context.Context, codec *cursor.Codec, txn *source.Txn) error {
	if len(txn.Events) == 0 {
		return nil // heartbeat or position-only
	}
	cur, err := codec.Encode(ctx, p.c.stream, txn.VGtid)
	if err != nil {
		return err
	}
	for i := range txn.Events {
		p.ev = txn.Events[i].AppendJSON(p.ev[:0], cur)
		if i == len(txn.Events)-1 {
			p.ev = append(p.ev[:len(p.ev)-1], `,"txn_end":true}`...)
		}
		p.key = strconv.AppendInt(append(append(p.key[:0], '"'), p.keyPrefix...), p.published+int64(p.n), 10)
		p.key = append(p.key, '"')
		if p.n == 0 {
			p.body = append(p.body[:0], `{"commands":[`...)
			p.first = append(p.first[:0], p.ev...)
			p.firstKey = append(p.firstKey[:0], p.key...)
		} else {
			p.body = append(p.body, ',')
		}
		p.body = append(p.body, `{"publish":{"channel":`...)
		p.body = append(p.body, p.channelJSON...)
		p.body = append(p.body, `,"idempotency_key":`...)
		p.body = append(p.body, p.key...)
		p.body = append(p.body, `,"data":`...)
		p.body = append(p.body, p.ev...)
		p.body = append(p.body, `}}`...)
		p.n++
	}
	return nil
}

// flush sends what was added, retrying until Centrifugo accepts it.
func (p *publisher) flush(ctx context.Context) error {
	if p.n == 0 {
		return nil
	}
	path, body := "/batch", append(p.body, `]}`...)
	if p.n == 1 {
		path = "/publish"
		body = append(append([]byte(`{"channel":`), p.channelJSON...), `,"idempotency_key":`...)
		body = append(append(append(append(body, p.firstKey...), `,"data":`...), p.first...), '}')
	}
	backoff := 50 * time.Millisecond
	for {
		err := p.post(ctx, path, body)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		p.log.Warn("publish failed; retrying", "events", p.n, "err", err)
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		backoff = min(2*backoff, 2*time.Second)
	}
	p.published += int64(p.n)
	p.n = 0
	return nil
}

func (p *publisher) post(ctx context.Context, path string, body []byte) error {
	req, _ := http.NewRequestWithContext(ctx, "POST", p.c.api+path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-API-Key", p.c.apiKey)
	resp, err := p.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: HTTP %d: %s", path, resp.StatusCode, b)
	}
	// A reply carries an error per command that failed.
	if bytes.Contains(b, []byte(`"error":`)) {
		return fmt.Errorf("%s: %s", path, b)
	}
	return nil
}

// loopbackOnly refuses addresses off this machine's loopback.
func loopbackOnly(apiURL, vtgate string) error {
	u, err := url.Parse(apiURL)
	if err != nil {
		return err
	}
	for _, hp := range []string{u.Host, vtgate} {
		host, _, err := net.SplitHostPort(hp)
		if err != nil {
			host = hp
		}
		ips, err := net.LookupIP(host)
		if err != nil {
			return err
		}
		for _, ip := range ips {
			if !ip.IsLoopback() {
				return errors.New(hp + " is not a loopback address")
			}
		}
	}
	return nil
}
