package position

import (
	"hash/maphash"
	"sync/atomic"

	"vitess.io/vitess/go/mysql/replication"
)

// Positions are compared far more often than they are made: a reader that
// joins a tail searches its history (a dozen comparisons), every long-poll
// joins again, and each comparison parsed both GTID sets from their text
// (most of a join's CPU in a profile of 100 pollers). A small cache of
// parsed sets, direct-mapped by the text's hash and bounded (one set a
// slot, the newest wins), makes a repeated comparison a hash and a string
// compare. A parsed set is only read (AtLeast), so one is shared by every
// goroutine that looks it up.

// parsedSlots is the cache's size: a power of two.
const parsedSlots = 1024

type parsedGTID struct {
	text string
	pos  replication.Position
	err  error
}

var (
	parsedSeed = maphash.MakeSeed()
	parsedSets [parsedSlots]atomic.Pointer[parsedGTID]
)

// parseCached is ParseGTID through the cache.
func parseCached(gtid string) (replication.Position, error) {
	slot := &parsedSets[maphash.String(parsedSeed, gtid)&(parsedSlots-1)]
	if p := slot.Load(); p != nil && p.text == gtid {
		return p.pos, p.err
	}
	pos, err := ParseGTID(gtid)
	slot.Store(&parsedGTID{text: gtid, pos: pos, err: err})
	return pos, err
}
