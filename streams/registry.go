package streams

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"sync"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/vstream-gateway/vstream-gateway/store"
)

const ns = "streams"

// Sentinel errors of the registry.
var (
	ErrNotFound = errors.New("stream not found")
	ErrExists   = errors.New("stream already exists")
)

// Checker verifies a definition against the live schema (tables and
// columns exist) before it is accepted.
type Checker interface {
	CheckDefinition(ctx context.Context, d *Definition) error
}

// Registry persists definitions in the store and caches them: every
// request looks its stream up, and definitions change rarely. The cache is
// read from the store on a miss, so a stream created on another replica is
// found at once. A cached definition older than refreshEvery is served as
// it is and read again in the background, so that a store that hangs
// (DESIGN §12) never holds up a reader; a deletion on another replica is
// seen within refreshEvery and one more request.
type Registry struct {
	st         store.Store
	checker    Checker
	mu         sync.RWMutex
	cache      map[string]*Definition
	loaded     time.Time            // last List
	fetched    map[string]time.Time // last read of one definition
	refreshing map[string]bool
}

const refreshEvery = 5 * time.Second

// refreshTimeout bounds a background read of a cached definition.
const refreshTimeout = 2 * time.Second

// NewRegistry returns a registry over st. checker may be nil.
func NewRegistry(st store.Store, checker Checker) *Registry {
	return &Registry{st: st, checker: checker, cache: map[string]*Definition{},
		fetched: map[string]time.Time{}, refreshing: map[string]bool{}}
}

// Create validates and stores a new definition.
func (r *Registry) Create(ctx context.Context, d *Definition) error {
	if err := d.Normalize(); err != nil {
		return err
	}
	if r.checker != nil {
		if err := r.checker.CheckDefinition(ctx, d); err != nil {
			return err
		}
	}
	d.CreatedAt = time.Now().UTC().Truncate(time.Second)
	b, err := json.Marshal(d)
	if err != nil {
		return err
	}
	ok, err := r.st.PutIfAbsent(ctx, ns, d.Name, b)
	if err != nil {
		return fmt.Errorf("save stream: %w", err)
	}
	if !ok {
		return ErrExists
	}
	r.mu.Lock()
	r.cache[d.Name], r.fetched[d.Name] = d, time.Now()
	r.mu.Unlock()
	return nil
}

// Upsert stores d, replacing a definition of the same name (config files).
// What the stored one has of its own (its creation time, the MoveTables
// cutovers it followed, a block) is kept, from the definition stored when
// d is written (update).
func (r *Registry) Upsert(ctx context.Context, d *Definition) error {
	if err := d.Normalize(); err != nil {
		return err
	}
	in := *d
	stored, err := r.update(ctx, d.Name, func(old *Definition) (*Definition, error) {
		n := in
		if old == nil {
			n.CreatedAt = time.Now().UTC().Truncate(time.Second)
			return &n, nil
		}
		n.CreatedAt = old.CreatedAt
		if len(old.Moves) > 0 && old.Origin() == n.Keyspace {
			// The file names the keyspace the stream began on; its
			// tables have moved since: keep following them.
			n.Keyspace, n.Moves = old.Keyspace, old.Moves
		}
		if old.Blocked != nil && old.Keyspace == n.Keyspace && slices.Equal(old.TableNames(), n.TableNames()) {
			n.Blocked = old.Blocked // the same stream: still blocked
		}
		return &n, nil
	})
	if err != nil {
		return err
	}
	*d = *stored
	return nil
}

// Get returns the named definition or ErrNotFound.
func (r *Registry) Get(ctx context.Context, name string) (*Definition, error) {
	r.mu.Lock()
	d, ok := r.cache[name]
	stale := time.Since(r.loaded) >= refreshEvery && time.Since(r.fetched[name]) >= refreshEvery
	refresh := ok && stale && !r.refreshing[name]
	if refresh {
		r.refreshing[name] = true
	}
	r.mu.Unlock()
	if refresh {
		go func() {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), refreshTimeout)
			defer cancel()
			_, _ = r.fetch(ctx, name) // a store error keeps the cached copy
			r.mu.Lock()
			delete(r.refreshing, name)
			r.mu.Unlock()
		}()
	}
	if ok {
		return d, nil
	}
	return r.fetch(ctx, name)
}

// fetch reads one definition from the store into the cache.
func (r *Registry) fetch(ctx context.Context, name string) (*Definition, error) {
	b, err := r.st.Get(ctx, ns, name)
	if errors.Is(err, store.ErrNotFound) {
		r.mu.Lock()
		delete(r.cache, name)
		delete(r.fetched, name)
		r.mu.Unlock()
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	d := &Definition{}
	if err := json.Unmarshal(b, d); err != nil {
		return nil, fmt.Errorf("stream %s: corrupt definition: %w", name, err)
	}
	r.mu.Lock()
	r.cache[name], r.fetched[name] = d, time.Now()
	r.mu.Unlock()
	return d, nil
}

// List returns every definition sorted by name.
func (r *Registry) List(ctx context.Context) ([]*Definition, error) {
	recs, err := r.st.List(ctx, ns)
	if err != nil {
		return nil, err
	}
	out := make([]*Definition, 0, len(recs))
	cache := make(map[string]*Definition, len(recs))
	for _, rec := range recs {
		d := &Definition{}
		if err := json.Unmarshal(rec.Value, d); err != nil {
			return nil, fmt.Errorf("stream %s: corrupt definition: %w", rec.Key, err)
		}
		out = append(out, d)
		cache[d.Name] = d
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	r.mu.Lock()
	r.cache, r.loaded = cache, time.Now()
	r.mu.Unlock()
	return out, nil
}

// Delete removes a definition; ErrNotFound if absent.
func (r *Registry) Delete(ctx context.Context, name string) error {
	if _, err := r.Get(ctx, name); err != nil {
		return err
	}
	if err := r.st.Delete(ctx, ns, name); err != nil {
		return err
	}
	r.mu.Lock()
	delete(r.cache, name)
	delete(r.fetched, name)
	r.mu.Unlock()
	return nil
}

// File is the YAML streams file.
type File struct {
	Streams []*Definition `yaml:"streams"`
}

// LoadFile upserts every stream of a YAML file.
func (r *Registry) LoadFile(ctx context.Context, path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	var f File
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	for i, d := range f.Streams {
		if err := r.Upsert(ctx, d); err != nil {
			return i, fmt.Errorf("%s: stream %d (%s): %w", path, i, d.Name, err)
		}
	}
	return len(f.Streams), nil
}

// Cached returns the names of the definitions this replica holds in its
// cache, sorted: after the store lost its data, what it may have lost.
func (r *Registry) Cached() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	names := make([]string, 0, len(r.cache))
	for n := range r.cache {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
