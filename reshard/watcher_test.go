package reshard

import (
	"context"
	"errors"
	"github.com/vstream-gateway/vstream-gateway/internal/wait"
	"io"
	"log/slog"
	"path/filepath"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vstream-gateway/vstream-gateway/internal/fakevtgate"
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
		func(context.Context, *Journal) {}, WithLeaseTTL(ttl), WithWatcherLogger(quiet))
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
