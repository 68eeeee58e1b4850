package streams

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/vstream-gateway/vstream-gateway/store"
)

// ErrContended is returned when a definition changed between the read and
// the write of every attempt to update it.
var ErrContended = errors.New("stream definition kept changing under the update")

// maxUpdateAttempts bounds an update's read-compute-swap rounds: a
// definition's writers are few (the streams file, the API, MoveTables
// cutovers), and each wins a round.
const maxUpdateAttempts = 16

// update changes the stored definition of name: change gets it (nil when
// there is none) and returns the one to store, or nil to store nothing;
// it is written by compare-and-swap against what was read, and computed
// again from what is stored now when another write came between (a
// MoveTables cutover recorded by one replica while another applies the
// streams file): no write puts back a definition read before another's
// change. change must depend on its argument alone (it may run several
// times). It returns the definition stored when it ended, cached.
func (r *Registry) update(ctx context.Context, name string, change func(old *Definition) (*Definition, error)) (*Definition, error) {
	for range maxUpdateAttempts {
		raw, err := r.st.Get(ctx, ns, name)
		var old *Definition
		switch {
		case err == nil:
			old = &Definition{}
			if err := json.Unmarshal(raw, old); err != nil {
				return nil, fmt.Errorf("stream %s: corrupt definition: %w", name, err)
			}
		case errors.Is(err, store.ErrNotFound):
			raw = nil
		default:
			return nil, err
		}
		d, err := change(old)
		if err != nil {
			return nil, err
		}
		if d == nil {
			if old != nil {
				r.cached(old)
			}
			return old, nil
		}
		b, err := json.Marshal(d)
		if err != nil {
			return nil, err
		}
		ok, err := r.st.CompareAndSwap(ctx, ns, name, raw, b)
		if err != nil {
			return nil, fmt.Errorf("save stream: %w", err)
		}
		if ok {
			r.cached(d)
			return d, nil
		}
	}
	return nil, fmt.Errorf("stream %s: %w (%d attempts)", name, ErrContended, maxUpdateAttempts)
}

// cached puts d, just read or written, in the cache.
func (r *Registry) cached(d *Definition) {
	r.mu.Lock()
	r.cache[d.Name], r.fetched[d.Name] = d, time.Now()
	r.mu.Unlock()
}
