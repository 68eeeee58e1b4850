package client

import (
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v5"
)

// fullJitter is "full jitter" backoff: a random wait between zero and a
// cap that doubles from lo up to hi, so that the many clients a gateway
// restart cut off come back spread out rather than in step. The cap
// starts over once a connection delivered something (progress): a
// connection that worked and then broke is not a failing gateway.
type fullJitter struct {
	caps     backoff.ExponentialBackOff
	progress atomic.Bool
}

func newFullJitter(lo, hi time.Duration) *fullJitter {
	return &fullJitter{caps: backoff.ExponentialBackOff{
		InitialInterval: lo, MaxInterval: hi, Multiplier: 2, RandomizationFactor: 0,
	}}
}

// Reset starts the caps over.
func (b *fullJitter) Reset() { b.caps.Reset() }

// NextBackOff is the wait before the next attempt.
func (b *fullJitter) NextBackOff() time.Duration {
	if b.progress.Swap(false) {
		b.caps.Reset()
	}
	return rand.N(b.caps.NextBackOff() + 1)
}

// progressed records that a connection delivered something.
func (b *fullJitter) progressed() { b.progress.Store(true) }

var _ backoff.BackOff = (*fullJitter)(nil)
