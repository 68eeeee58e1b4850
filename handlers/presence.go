package handlers

import (
	"sync"
	"time"
)

// presence knows which named subscribers read on this replica now, and
// when each was last seen, for the console's subscriber list: "connected"
// is a fact of one process (another replica may serve the subscriber).
type presence struct {
	mu    sync.Mutex
	conns map[presenceKey]*presenceEntry
}

type presenceKey struct{ stream, sub string }

type presenceEntry struct {
	open     int
	lastSeen time.Time
}

// present records that sub reads stream until the returned function is
// called; anonymous readers are not recorded.
func (a *API) present(stream, sub string) (leave func()) {
	if sub == "" {
		return func() {}
	}
	p := &a.presence
	k := presenceKey{stream, sub}
	p.mu.Lock()
	if p.conns == nil {
		p.conns = map[presenceKey]*presenceEntry{}
	}
	e := p.conns[k]
	if e == nil {
		e = &presenceEntry{}
		p.conns[k] = e
	}
	e.open++
	e.lastSeen = time.Now()
	p.mu.Unlock()
	return func() {
		p.mu.Lock()
		e.open--
		e.lastSeen = time.Now()
		p.mu.Unlock()
	}
}

// seen reports how many connections sub has open on stream here and when
// it was last seen (zero if never, since this process started).
func (a *API) seen(stream, sub string) (open int, last time.Time) {
	p := &a.presence
	p.mu.Lock()
	defer p.mu.Unlock()
	if e := p.conns[presenceKey{stream, sub}]; e != nil {
		return e.open, e.lastSeen
	}
	return 0, time.Time{}
}

// forget drops what is known of sub (deleted).
func (a *API) forgetPresence(stream, sub string) {
	p := &a.presence
	p.mu.Lock()
	defer p.mu.Unlock()
	if e := p.conns[presenceKey{stream, sub}]; e != nil && e.open == 0 {
		delete(p.conns, presenceKey{stream, sub})
	}
}
