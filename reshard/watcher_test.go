package reshard

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"

	"github.com/vstream-gateway/vstream-gateway/internal/fakevtgate"
	"github.com/vstream-gateway/vstream-gateway/internal/wait"
	"github.com/vstream-gateway/vstream-gateway/source"
	"github.com/vstream-gateway/vstream-gateway/store"
	"github.com/vstream-gateway/vstream-gateway/store/boltstore"
)

// flakyStore fails lease renewals while failing is set, as a store that
// is briefly unreachable does.
type flakyStore struct {
	store.Store
	failing atomic.Bool

	mu          sync.Mutex
	renewOK     int
	renewFailed int
}

var errFlaky = errors.New("store unreachable")

func (f *flakyStore) RenewLease(ctx context.Context, l store.Lease, ttl time.Duration) (store.Lease, error) {
	var err error
	if f.failing.Load() {
		err = errFlaky
	} else {
		l, err = f.Store.RenewLease(ctx, l, ttl)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err == nil {
		f.renewOK++
	} else {
		f.renewFailed++
	}
	return l, err
}

func (f *flakyStore) renewals() (ok, failed int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.renewOK, f.renewFailed
}

// A renewal that fails once, well within the lease time, must not stop
// the watch: the VStream stays open and the lease stays with its holder
// (same token). A watcher that gave up at the first failed renewal
// reopened the stream and let the lease go at every store hiccup.
func TestWatcherKeepsWatchingThroughTransientStoreErrors(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	st, err := boltstore.Open(filepath.Join(t.TempDir(), "vsg.db"), boltstore.WithNoSync())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	fs := &flakyStore{Store: st}

	fake := fakevtgate.New(t)
	fake.Push(fakevtgate.Script{Open: true}) // one stream, open until the watcher closes it
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	src, err := source.Dial(ctx, fake.Addr, source.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(src.Close)

	const ttl = 1500 * time.Millisecond
	w := NewWatcher(src, fs, NewRegistry(st), "a",
		func(context.Context) ([]string, error) { return []string{"ks"}, nil },
		func(context.Context, *Journal, store.Lease) {}, WithLeaseTTL(ttl), WithWatcherLogger(quiet))
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.Run(runCtx); close(done) }()
	t.Cleanup(func() { stop(); <-done })

	call := fake.Call(t, 0)
	wait.For(t, "the watch", 5*time.Second, func() bool { return reflect.DeepEqual(w.Watching(), []string{"ks"}) })
	held, err := st.GetLease(context.Background(), leaseName("ks"))
	if err != nil {
		t.Fatal(err)
	}

	fs.failing.Store(true)
	wait.For(t, "a failed renewal", 5*time.Second, func() bool { _, failed := fs.renewals(); return failed >= 1 })
	fs.failing.Store(false)
	ok, _ := fs.renewals()
	wait.For(t, "renewals to resume", 5*time.Second, func() bool { n, _ := fs.renewals(); return n >= ok+2 })

	select {
	case <-call.Done():
		t.Fatal("the journal watcher's VStream was closed by a transient store error")
	default:
	}
	if n := fake.Calls(); n != 1 {
		t.Fatalf("%d VStream calls, want the first one still open", n)
	}
	if got := w.Watching(); !reflect.DeepEqual(got, []string{"ks"}) {
		t.Fatalf("watching %v", got)
	}
	now, err := st.GetLease(context.Background(), leaseName("ks"))
	if err != nil || now.Holder != "a" || now.Token != held.Token {
		t.Fatalf("lease after the store error: %+v, %v; want a's, token %d", now, err, held.Token)
	}
}

// The watcher hands its lease to what it calls for a complete journal, so
// the bridges it starts write their spools fenced by it (a replica that
// lost the lease mid-bridge cannot append beside the next holder).
func TestWatcherHandsItsLeaseToBridges(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	st, err := boltstore.Open(filepath.Join(t.TempDir(), "vsg.db"), boltstore.WithNoSync())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	reg := NewRegistry(st)
	shard := fakevtgate.Shard{Keyspace: "ks", Name: "0"}
	journal := shard.JournalTxn(7, []string{"0"}, "MariaDB/0-1-20", fakevtgate.VGtid("ks", "0", "MariaDB/0-1-21"),
		"-80", "MariaDB/0-2-5", "80-", "MariaDB/0-3-5")
	for _, ev := range journal {
		if ev.Journal != nil {
			j, _ := FromEvent("ks", "0", ev.Journal)
			if _, err := reg.Record(ctx, j); err != nil {
				t.Fatal(err)
			}
		}
	}
	fake := fakevtgate.New(t)
	fake.Push(fakevtgate.Script{Open: true, Batches: [][]*binlogdatapb.VEvent{
		{shard.Pos(fakevtgate.VGtid("ks", "0", "MariaDB/0-1-19"))}, journal}})
	src, err := source.Dial(ctx, fake.Addr, source.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(src.Close)
	got := make(chan store.Lease, 1)
	w := NewWatcher(src, st, reg, "a",
		func(context.Context) ([]string, error) { return []string{"ks"}, nil },
		func(_ context.Context, _ *Journal, l store.Lease) {
			select {
			case got <- l:
			default:
			}
		}, WithWatcherLogger(quiet))
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.Run(runCtx); close(done) }()
	t.Cleanup(func() { stop(); <-done })

	var l store.Lease
	select {
	case l = <-got:
	case <-ctx.Done():
		t.Fatal("the complete journal was not handed on")
	}
	held, err := st.GetLease(ctx, leaseName("ks"))
	if err != nil {
		t.Fatal(err)
	}
	if l.Name != leaseName("ks") || l.Token != held.Token || held.Holder != "a" {
		t.Fatalf("handed lease %+v, held %+v", l, held)
	}
}
