package webhook

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"syscall"
	"time"
	"unicode/utf8"
)

// userAgent identifies the gateway to receivers.
const userAgent = "vstream-gateway-webhooks/1"

// maxResponseBody is how much of a response is read (and then dropped):
// reading it lets the connection be reused; more is not worth waiting for.
const maxResponseBody = 64 << 10

// snippetLen is how much of an error response is kept for last_error.
const snippetLen = 256

// attempt is the result of one POST.
type attempt struct {
	status        int // 0 when no response was received
	err           error
	class         class
	kind          string // failure kind for metrics; "" on success
	retryAfter    time.Duration
	hasRetryAfter bool
	snippet       string
	took          time.Duration
}

// describe is the attempt's outcome in words, for last_error.
func (a *attempt) describe() string {
	switch {
	case a.err != nil:
		return a.err.Error()
	case a.snippet != "":
		return fmt.Sprintf("HTTP %d: %s", a.status, a.snippet)
	default:
		return fmt.Sprintf("HTTP %d", a.status)
	}
}

// newHTTPClient returns the client every delivery uses: connections are
// checked against the address policy as they are made, proxies from the
// environment are ignored (a proxy would connect on our behalf, past the
// check), and redirects are returned rather than followed.
func newHTTPClient(p AddressPolicy) *http.Client {
	d := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second, Control: p.control}
	tr := &http.Transport{
		Proxy:                 nil,
		DialContext:           d.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          256,
		MaxIdleConnsPerHost:   4,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	return &http.Client{
		Transport:     tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// post sends one signed attempt of a message. The timestamp is the
// attempt's own (receivers refuse stale timestamps), the id and body are
// the batch's (receivers de-duplicate on the id).
func post(ctx context.Context, c *http.Client, wh *Webhook, id string, body []byte, now time.Time) *attempt {
	ctx, cancel := context.WithTimeout(ctx, wh.Timeout.D())
	defer cancel()
	a := &attempt{}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, wh.URL, bytes.NewReader(body))
	if err != nil {
		a.err, a.class, a.kind = err, classPermanent, "invalid_request"
		return a
	}
	ts := now.Unix()
	h := req.Header
	h.Set("Content-Type", "application/json")
	h.Set("User-Agent", userAgent)
	h.Set(HeaderID, id)
	h.Set(HeaderTimestamp, strconv.FormatInt(ts, 10))
	h.Set(HeaderSignature, Sign(wh.signingKeys(now), id, ts, body))

	start := time.Now()
	resp, err := c.Do(req)
	if err != nil {
		a.took = time.Since(start)
		a.err, a.class, a.kind = netError(err, wh.Timeout.D()), classRetry, netKind(ctx, err)
		return a
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxResponseBody))
	resp.Body.Close()
	a.took = time.Since(start)
	a.status = resp.StatusCode
	a.class, a.kind = classifyStatus(resp.StatusCode)
	if a.class == classRetry {
		a.retryAfter, a.hasRetryAfter = ParseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
	}
	if a.class != classDelivered {
		a.snippet = snippet(b)
	}
	return a
}

// netKind labels a transport failure for metrics.
func netKind(ctx context.Context, err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, ErrForbiddenAddress):
		return "blocked_address"
	case errors.Is(ctx.Err(), context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return "connect"
	default:
		var dns *net.DNSError
		if errors.As(err, &dns) {
			return "dns"
		}
		return "network"
	}
}

// netError shortens url.Error's "Post \"…\": " prefix away (the URL is
// known) and names timeouts plainly.
func netError(err error, timeout time.Duration) error {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return fmt.Errorf("no response within %s", timeout)
	}
	var fe *ForbiddenAddressError
	if errors.As(err, &fe) {
		return fmt.Errorf("connection refused by the address policy: %w", fe)
	}
	for u := errors.Unwrap(err); u != nil; u = errors.Unwrap(u) {
		var op *net.OpError
		if errors.As(u, &op) {
			return op
		}
	}
	return err
}

func snippet(b []byte) string {
	b = bytes.TrimSpace(b)
	if len(b) > snippetLen {
		b = b[:snippetLen]
		for len(b) > 0 && !utf8.Valid(b) {
			b = b[:len(b)-1]
		}
	}
	return string(bytes.ToValidUTF8(b, []byte("?")))
}
