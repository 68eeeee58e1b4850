// Package source reads Vitess change streams from vtgate.
//
// A Reader opens a VStream from a position, groups VEvents into whole
// transactions (a position is never taken mid-transaction), encodes rows into
// JSON once, and reconnects with backoff after transient failures — resuming
// from the last transaction it handed out, so nothing is lost or repeated.
// Errors that no retry can fix (a position whose shards no longer exist, a
// filter vtgate rejects) are returned to the caller, who decides how to
// rebuild the position (see DESIGN §4).
package source

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"
	"unsafe"

	"google.golang.org/grpc"
	grpcbackoff "google.golang.org/grpc/backoff"
	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"
	topodatapb "vitess.io/vitess/go/vt/proto/topodata"
	"vitess.io/vitess/go/vt/vtgate/grpcvtgateconn"
	"vitess.io/vitess/go/vt/vtgate/vtgateconn"

	"github.com/vstream-gateway/vstream-gateway/event"
	"github.com/vstream-gateway/vstream-gateway/position"
)

// Spec says what to stream: one keyspace and its filter rules.
type Spec struct {
	Keyspace string
	Rules    []*binlogdatapb.Rule
	// Name labels logs and metrics.
	Name string
}

// Filter returns the Vitess filter for the spec.
func (s Spec) Filter() *binlogdatapb.Filter {
	return &binlogdatapb.Filter{Rules: s.Rules}
}

// Txn is what a Reader delivers: one committed transaction, or a control
// event, with the position right after it.
type Txn struct {
	// Events are the encoded changes (or one control event) in commit order.
	// Empty for position-only updates: transactions whose rows the filter
	// dropped still move the position.
	Events []event.Event
	// VGtid is the position after this transaction. Never nil; the Reader
	// owns it and does not modify it after delivery.
	VGtid *binlogdatapb.VGtid
	// CommitTS is the commit time in Unix seconds (0 in the copy phase).
	CommitTS int64
	// Journal is set when this is a reshard cutover.
	Journal *binlogdatapb.Journal
	// JournalDone is set on the transaction that carries the JOURNAL of the
	// last participant: every old shard has delivered all it had, and the
	// stream continues on the journal's shards.
	JournalDone bool
	// Heartbeat is set for vtgate heartbeats (no position change).
	Heartbeat bool
	// Received is when the gateway read the last event of the transaction.
	Received time.Time
	// Partial marks a piece of a transaction larger than the chunk size
	// (DESIGN §3.1): more of it follows, and VGtid is the position before
	// the transaction, not a cursor. The last piece has Partial false,
	// Continued true and the position after the whole transaction.
	Partial bool
	// Continued marks a piece that follows earlier pieces of the same
	// transaction (the middle and last pieces of a chunked transaction).
	Continued bool
	// encodings caches the events in other formats (Encoded).
	encodings *Encodings
}

// Chunked reports whether the transaction is delivered in pieces and this
// is one of them.
func (t *Txn) Chunked() bool { return t.Partial || t.Continued }

// Rows reports the number of change events.
func (t *Txn) Rows() int { return len(t.Events) }

// Weight estimates the memory a transaction holds, for read-ahead and
// send-queue budgets: its events (the slice's whole capacity) and their
// encoded JSON.
func (t *Txn) Weight() int {
	n := 256 + cap(t.Events)*int(unsafe.Sizeof(event.Event{})) // the transaction, its position, its events
	for i := range t.Events {
		n += t.Events[i].Size()
	}
	return n
}

// Client is a connection to vtgate shared by all readers of a process.
type Client struct {
	conn   *vtgateconn.VTGateConn
	addr   string
	log    *slog.Logger
	schema *schemaCache
	opts   options
	// readers are the open readers, which the primary watch notifies.
	readers   readerSet
	stopWatch context.CancelFunc
	watchDone chan struct{}
	// life ends every reader before the connection closes: a reader's
	// goroutine still calling VStream on a closed connection would race
	// with the close (vtgateconn drops its implementation).
	life lifetime
}

// lifetime counts a Client's running readers and ends them at Close.
type lifetime struct {
	mu      sync.Mutex
	closed  bool
	running sync.WaitGroup
	closing context.Context // cancelled by Close
	close   context.CancelFunc
}

type options struct {
	logger       *slog.Logger
	dialOpts     []grpc.DialOption
	tabletType   topodatapb.TabletType
	heartbeat    time.Duration
	queueTxns    int
	readAhead    int
	chunkBytes   int
	maxRetryWait time.Duration
	stallTimeout time.Duration
	primaryPoll  time.Duration
	onJournal    JournalHook
	incarnations Incarnations
}

// Incarnations tells a reader the incarnation (position/incarnation.go)
// of each shard of keyspace it reads without a position to say: a
// stream opened at "current" or for a snapshot, and the targets of a
// reshard it crosses. It is asked once per keyspace each time.
type Incarnations func(ctx context.Context, keyspace string) (func(shard string) string, error)

// WithIncarnations stamps positions with shard incarnations (DESIGN §4
// rule 6). Without it every shard is of incarnation "": names are
// identities, which holds as long as no reshard reuses one.
func WithIncarnations(f Incarnations) Option { return func(o *options) { o.incarnations = f } }

// JournalHook is called for every reshard JOURNAL any reader sees, with the
// participant shard that sent it, before the transaction is delivered.
type JournalHook func(ctx context.Context, keyspace, shard string, j *binlogdatapb.Journal)

// WithJournalHook records journals (DESIGN §4 rule 1).
func WithJournalHook(h JournalHook) Option { return func(o *options) { o.onJournal = h } }

// Option configures a Client.
type Option func(*options)

// WithLogger sets the logger.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// WithDialOptions adds gRPC dial options (TLS, per-RPC credentials).
func WithDialOptions(d ...grpc.DialOption) Option {
	return func(o *options) { o.dialOpts = append(o.dialOpts, d...) }
}

// WithTabletType selects the tablet type to stream from (default PRIMARY).
func WithTabletType(t topodatapb.TabletType) Option { return func(o *options) { o.tabletType = t } }

// WithHeartbeat sets how often vtgate sends a heartbeat on an idle stream.
func WithHeartbeat(d time.Duration) Option { return func(o *options) { o.heartbeat = d } }

// WithStallTimeout sets how long a VStream may stay silent — no event, not
// even a heartbeat — before it is cancelled and reopened from its last
// transaction (DESIGN §11 rule 5); 0 turns stall detection off. It only
// applies with heartbeats on (WithHeartbeat of a second or more), and
// should be several heartbeat intervals. Default DefaultStallTimeout.
func WithStallTimeout(d time.Duration) Option { return func(o *options) { o.stallTimeout = d } }

// DefaultStallTimeout is ten heartbeat intervals at the default heartbeat
// of 1 s: long enough for a vtgate slowed by a busy host, short enough
// that readers notice a dead network long before TCP would (its
// retransmissions give up after about 15 minutes).
const DefaultStallTimeout = 10 * time.Second

// WithQueue sets how many transactions a reader buffers ahead of its consumer.
func WithQueue(n int) Option { return func(o *options) { o.queueTxns = n } }

// WithReadAhead bounds, in bytes of encoded events, what a reader buffers
// ahead of its consumer (default 4 MiB), whatever the transaction count.
func WithReadAhead(bytes int) Option { return func(o *options) { o.readAhead = bytes } }

// WithChunkBytes sets the size, in bytes of encoded events, past which a
// transaction is delivered in pieces as it arrives instead of whole
// (default: a quarter of the read-ahead, at least 64 KiB). vtgate is asked
// to stream such transactions in chunks too (TransactionChunkSize), so
// that neither holds a whole huge transaction in memory.
func WithChunkBytes(bytes int) Option { return func(o *options) { o.chunkBytes = bytes } }

// WithMaxRetryWait bounds the backoff between reconnect attempts.
func WithMaxRetryWait(d time.Duration) Option { return func(o *options) { o.maxRetryWait = d } }

// Dial connects to vtgate's gRPC address.
func Dial(ctx context.Context, addr string, opts ...Option) (*Client, error) {
	o := options{
		logger:       slog.Default(),
		tabletType:   topodatapb.TabletType_PRIMARY,
		heartbeat:    time.Second,
		queueTxns:    512,
		readAhead:    4 << 20,
		maxRetryWait: 5 * time.Second,
		stallTimeout: DefaultStallTimeout,
	}
	for _, opt := range opts {
		opt(&o)
	}
	if o.chunkBytes <= 0 {
		o.chunkBytes = max(o.readAhead/4, 64<<10)
	}
	dialOpts := append(fastRecvOptions(), reconnectOptions(o.maxRetryWait), keepaliveOptions())
	conn, err := vtgateconn.DialCustom(ctx, grpcvtgateconn.Dial(append(dialOpts, o.dialOpts...)...), addr)
	if err != nil {
		return nil, fmt.Errorf("source: dial vtgate %s: %w", addr, err)
	}
	c := &Client{conn: conn, addr: addr, log: o.logger, opts: o}
	c.life.closing, c.life.close = context.WithCancel(context.Background())
	c.schema = newSchemaCache(conn)
	wctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	c.stopWatch, c.watchDone = stop, make(chan struct{})
	go func() {
		defer close(c.watchDone)
		if o.primaryPoll > 0 {
			c.watchPrimaries(wctx, o.primaryPoll)
		}
	}()
	return c, nil
}

// reconnectOptions bound how long the connection to vtgate stays down after
// vtgate is back. Calls wait for the connection (vtgateconn dials with
// WaitForReady), so a VStream retried during an outage starts as soon as
// gRPC reconnects; gRPC's own backoff would grow to two minutes between
// dials, leaving readers idle long after a vtgate restart. A dial to a
// vtgate that is down costs one refused TCP connection: every 2 s at most
// is cheap, and readers resume within 2 s of vtgate's return.
//
// A network that drops packets refuses nothing: a dial sends SYNs that
// vanish, and the kernel spaces its retransmissions further and further
// apart (1 s, 2 s, 4 s, 8 s…), so once the network heals a dial that has
// been trying for long only succeeds at its next retransmission — seen 5.5
// s after the heal with gRPC's default 20 s connect timeout. Giving up a
// dial after connectTimeout and starting a fresh one keeps the SYNs at
// most a few seconds apart. Connecting to vtgate, TLS included, takes
// milliseconds where it works at all.
func reconnectOptions(maxWait time.Duration) grpc.DialOption {
	return grpc.WithConnectParams(grpc.ConnectParams{
		Backoff: grpcbackoff.Config{
			BaseDelay:  min(250*time.Millisecond, maxWait),
			Multiplier: 1.6,
			Jitter:     0.2,
			MaxDelay:   min(2*time.Second, maxWait),
		},
		MinConnectTimeout: connectTimeout,
	})
}

// connectTimeout bounds one dial of vtgate (see reconnectOptions).
const connectTimeout = 5 * time.Second

// Close stops the primary watch and closes the vtgate connection.
func (c *Client) Close() {
	c.life.mu.Lock()
	c.life.closed = true
	c.life.mu.Unlock()
	c.life.close()
	c.life.running.Wait()
	c.stopWatch()
	<-c.watchDone
	c.conn.Close()
}

// started counts a reader's goroutine in, reporting false once the
// client is closed.
func (l *lifetime) started() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	l.running.Add(1)
	return true
}

// Conn exposes the vtgate connection for schema queries and health checks.
func (c *Client) Conn() *vtgateconn.VTGateConn { return c.conn }

// Start positions for a new stream: every shard of keyspace from now, or
// from a consistent copy-phase snapshot followed by its changes. (A
// definition's start mode, "now" or "snapshot", is streams.StartNow or
// streams.StartSnapshot.)
func NowPosition(keyspace string) *binlogdatapb.VGtid {
	return &binlogdatapb.VGtid{ShardGtids: []*binlogdatapb.ShardGtid{{Keyspace: keyspace, Gtid: position.CurrentGTID}}}
}

// SnapshotPosition returns the position that starts with a copy phase.
func SnapshotPosition(keyspace string) *binlogdatapb.VGtid {
	return &binlogdatapb.VGtid{ShardGtids: []*binlogdatapb.ShardGtid{{Keyspace: keyspace, Gtid: ""}}}
}
