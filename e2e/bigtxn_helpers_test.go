package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// Helpers of the huge-transaction tests (bigtxn_test.go): a gateway under a
// memory limit, and readers that keep only row ids, applying the rule a
// client of a chunked transaction follows: events are pending until a
// cursor ends their transaction; after a reconnect (which resumes from the
// last cursor) the pending events are dropped, because the transaction
// comes again whole.

// memoryLimit runs g under a hard memory limit: a cgroup (v2 memory.max,
// or v1 memory.limit_in_bytes) when one can be made, otherwise an
// address-space limit (prlimit --as, far looser for a Go process, which
// reserves address space it never touches). It returns how the limit is
// applied, and the cgroup's peak usage reader (nil without one).
func memoryLimit(t *testing.T, g *gateway, limit int64) (string, func() int64) {
	t.Helper()
	name := fmt.Sprintf("vsg-bigtxn-%d-%d", os.Getpid(), time.Now().UnixNano())
	try := []struct{ root, limitFile, peakFile string }{
		{"/sys/fs/cgroup", "memory.max", "memory.peak"},
		{"/sys/fs/cgroup/memory", "memory.limit_in_bytes", "memory.max_usage_in_bytes"},
	}
	for _, c := range try {
		if _, err := os.Stat(filepath.Join(c.root, "cgroup.procs")); err != nil {
			continue
		}
		dir := filepath.Join(c.root, name)
		if os.Mkdir(dir, 0o755) != nil {
			continue
		}
		if os.WriteFile(filepath.Join(dir, c.limitFile), []byte(strconv.FormatInt(limit, 10)), 0o644) != nil {
			os.Remove(dir)
			continue
		}
		// No swap to hide in (v2; v1 memsw when the kernel accounts it).
		os.WriteFile(filepath.Join(dir, "memory.swap.max"), []byte("0"), 0o644)
		os.WriteFile(filepath.Join(dir, "memory.memsw.limit_in_bytes"), []byte(strconv.FormatInt(limit, 10)), 0o644)
		t.Cleanup(func() { os.Remove(dir) }) // after the gateway's own cleanup stopped it
		// The shell joins the cgroup, then becomes the gateway.
		g.wrap = []string{"sh", "-c", `echo $$ > "$0/cgroup.procs" && exec "$@"`, dir}
		peak := func() int64 {
			b, err := os.ReadFile(filepath.Join(dir, c.peakFile))
			if err != nil {
				return 0
			}
			n, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
			return n
		}
		return "cgroup " + dir + " " + c.limitFile, peak
	}
	g.wrap = []string{"prlimit", "--as=" + strconv.FormatInt(4*limit, 10), "--"}
	return "prlimit --as (no writable cgroup)", nil
}

// vmHWM reads a process's peak resident set size in bytes.
func vmHWM(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmHWM:" {
			n, _ := strconv.ParseInt(f[1], 10, 64)
			return n << 10
		}
	}
	return 0
}

// txnLedger is what one reader got: committed ids in order, and the
// events pending since its last cursor.
type txnLedger struct {
	name string

	mu        sync.Mutex
	committed []int64
	pending   []int64
	cursor    string // the last cursor, ending a transaction
	cursors   int    // cursors seen on row events
	dropped   int    // pending events dropped at reconnects (a transaction broken off)
	restarts  int
	why       []string // why each connection ended, for a failure's message
	err       error
	// hold and release (holdAt): the reader stops once hold events are
	// pending, until release is closed.
	hold    int
	release chan struct{}
}

func (l *txnLedger) add(id int64) {
	l.mu.Lock()
	l.pending = append(l.pending, id)
	wait := l.hold > 0 && len(l.pending) >= l.hold
	release := l.release
	l.mu.Unlock()
	if wait {
		<-release
		l.mu.Lock()
		l.hold = 0
		l.mu.Unlock()
	}
}

// holdAt makes the reader stop reading once n events are pending, until
// release is closed.
func (l *txnLedger) holdAt(n int, release chan struct{}) {
	l.mu.Lock()
	l.hold, l.release = n, release
	l.mu.Unlock()
}

// commit ends a transaction at cursor.
func (l *txnLedger) commit(cursor string) {
	l.mu.Lock()
	l.committed = append(l.committed, l.pending...)
	l.pending = l.pending[:0]
	l.cursor = cursor
	l.cursors++
	l.mu.Unlock()
}

// reset drops what no cursor covers: the reader resumes from its last one.
// cause is why the connection ended.
func (l *txnLedger) reset(cause error) {
	l.mu.Lock()
	l.why = append(l.why, fmt.Sprint(cause))
	l.dropped += len(l.pending)
	l.pending = l.pending[:0]
	l.restarts++
	l.mu.Unlock()
}

func (l *txnLedger) state() (committed, pending int, last int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	last = -1
	if n := len(l.committed); n > 0 {
		last = l.committed[n-1]
	}
	return len(l.committed), len(l.pending), last
}

func (l *txnLedger) lastCursor() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cursor
}

// check reports whether the committed ids are exactly want, in order.
func (l *txnLedger) check(want []int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.committed) != len(want) {
		return fmt.Errorf("%s: %d rows committed, want %d", l.name, len(l.committed), len(want))
	}
	for i := range want {
		if l.committed[i] != want[i] {
			return fmt.Errorf("%s: row %d is id %d, want %d (repeated or out of order)", l.name, i, l.committed[i], want[i])
		}
	}
	return nil
}

// bigEvent is the part of an event the readers look at.
type bigEvent struct {
	Type   string                   `json:"type"`
	After  struct{ ID json.Number } `json:"after"`
	Cursor string                   `json:"cursor"`
	TxnEnd bool                     `json:"txn_end"`
}

// parseBig reads the members the readers need without decoding the row
// images: the test process runs under the race detector, where decoding
// hundreds of MiB three times would be what the test measures.
func parseBig(b []byte) (bigEvent, error) {
	var e bigEvent
	str := func(key string) string {
		i := bytes.Index(b, []byte(`"`+key+`":"`))
		if i < 0 {
			return ""
		}
		rest := b[i+len(key)+4:]
		j := bytes.IndexByte(rest, '"')
		if j < 0 {
			return ""
		}
		return string(rest[:j])
	}
	e.Type = str("type")
	if e.Type == "" {
		return e, fmt.Errorf("event without type: %.200s", b)
	}
	e.Cursor = str("cursor")
	e.TxnEnd = bytes.Contains(b, []byte(`"txn_end":true`))
	if i := bytes.Index(b, []byte(`"after":{"id":`)); i >= 0 {
		rest := b[i+len(`"after":{"id":`):]
		rest = bytes.TrimPrefix(rest, []byte(`"`))
		j := 0
		for j < len(rest) && rest[j] >= '0' && rest[j] <= '9' {
			j++
		}
		e.After.ID = json.Number(rest[:j])
	}
	return e, nil
}

func (e *bigEvent) id() (int64, bool) {
	if e.Type != "change" {
		return 0, false
	}
	n, err := e.After.ID.Int64()
	return n, err == nil
}

// runWS reads stream over WebSocket as subscriber until ctx ends,
// reconnecting (from the stored cursor) whenever the connection drops,
// and acking every cursor that ends a transaction.
func runWS(ctx context.Context, url func() string, stream, sub string, l *txnLedger) {
	var err error
	for first := true; ctx.Err() == nil; first = false {
		if !first {
			l.reset(err)
		}
		err = readWS(ctx, url(), stream, sub, l)
		if ctx.Err() == nil {
			retryPause(ctx, err)
		}
	}
}

func readWS(ctx context.Context, base, stream, sub string, l *txnLedger) error {
	// The client's own last cursor: an ack in flight when the gateway was
	// killed may not be stored.
	u := "ws" + strings.TrimPrefix(base, "http") + "/v1/streams/" + stream + "/ws?" + query(sub, l.lastCursor())
	c, _, err := websocket.Dial(ctx, u, nil)
	if err != nil {
		return err
	}
	defer c.CloseNow()
	c.SetReadLimit(1 << 20)
	for {
		_, b, err := c.Read(ctx)
		if err != nil {
			return err
		}
		e, err := parseBig(b)
		if err != nil {
			return err
		}
		if id, ok := e.id(); ok {
			l.add(id)
		}
		if e.TxnEnd {
			l.commit(e.Cursor)
			ack, _ := json.Marshal(map[string]string{"ack": e.Cursor})
			if err := c.Write(ctx, websocket.MessageText, ack); err != nil {
				return err
			}
		}
	}
}

// runSSE reads stream over SSE as subscriber, reconnecting with the id of
// the last transaction end as Last-Event-ID (the browser's behaviour).
func runSSE(ctx context.Context, url func() string, stream, sub string, l *txnLedger) {
	var err error
	for first := true; ctx.Err() == nil; first = false {
		if !first {
			l.reset(err)
		}
		err = readSSE(ctx, url(), stream, sub, l)
		if ctx.Err() == nil {
			retryPause(ctx, err)
		}
	}
}

func readSSE(ctx context.Context, base, stream, sub string, l *txnLedger) error {
	req, err := http.NewRequestWithContext(ctx, "GET", base+"/v1/streams/"+stream+"/sse?"+query(sub, ""), nil)
	if err != nil {
		return err
	}
	if c := l.lastCursor(); c != "" {
		req.Header.Set("Last-Event-ID", c)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("sse: status %d", resp.StatusCode)
	}
	rd := bufio.NewReaderSize(resp.Body, 64<<10)
	id := ""
	for {
		line, err := rd.ReadSlice('\n')
		if err != nil {
			return err
		}
		s := strings.TrimRight(string(line), "\n")
		switch {
		case strings.HasPrefix(s, "id: "):
			id = s[4:]
		case strings.HasPrefix(s, "data: "):
			e, err := parseBig([]byte(s[6:]))
			if err != nil {
				return err
			}
			if n, ok := e.id(); ok {
				l.add(n)
			}
			switch {
			case id != "" && e.Type == "heartbeat":
				// The browser keeps it as Last-Event-ID, but it ends no
				// transaction: inside a chunked one it is the cursor
				// before it.
				l.mu.Lock()
				l.cursor = id
				l.mu.Unlock()
			case id != "":
				l.commit(id)
			}
			id = ""
		}
	}
}

// retryPause waits a moment before a reader reconnects (a gateway being
// restarted refuses connections until it listens again).
func retryPause(ctx context.Context, _ error) {
	t := time.NewTimer(200 * time.Millisecond)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// bigReceiver is a webhook receiver that applies the rule for parts of a
// chunked transaction: part 1 starts the transaction afresh (the gateway
// resends a transaction whole from its first part after a restart), a
// batch with a cursor commits it.
type bigReceiver struct {
	srv     *httptest.Server
	l       *txnLedger
	mu      sync.Mutex
	ids     map[string]int // webhook-id → times received
	parts   int
	maxBody int
}

func newBigReceiver(t *testing.T, l *txnLedger) *bigReceiver {
	r := &bigReceiver{l: l, ids: map[string]int{}}
	r.srv = httptest.NewServer(r)
	t.Cleanup(r.srv.Close)
	return r
}

func (r *bigReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	var m struct {
		Cursor string     `json:"cursor"`
		Part   int        `json:"part"`
		More   bool       `json:"more"`
		Events []bigEvent `json:"events"`
	}
	if err := json.Unmarshal(body, &m); err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	r.ids[req.Header.Get("webhook-id")]++
	if m.Part > 0 {
		r.parts++
	}
	r.maxBody = max(r.maxBody, len(body))
	r.mu.Unlock()
	if m.Part == 1 {
		r.l.mu.Lock()
		if len(r.l.pending) > 0 {
			r.l.dropped += len(r.l.pending)
			r.l.restarts++
			r.l.pending = r.l.pending[:0]
		}
		r.l.mu.Unlock()
	}
	for i := range m.Events {
		if id, ok := m.Events[i].id(); ok {
			r.l.add(id)
		}
	}
	if m.Cursor != "" {
		r.l.commit(m.Cursor)
	} else if !m.More {
		r.l.mu.Lock()
		r.l.err = fmt.Errorf("webhook batch without cursor and without more")
		r.l.mu.Unlock()
	}
	w.WriteHeader(http.StatusNoContent)
}

// repeatedIDs counts webhook-ids received more than once.
func (r *bigReceiver) repeatedIDs() (repeated, parts, maxBody int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, n := range r.ids {
		if n > 1 {
			repeated++
		}
	}
	return repeated, r.parts, r.maxBody
}
