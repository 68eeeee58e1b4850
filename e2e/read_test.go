package e2e

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"vitess.io/vitess/go/sqltypes"
	"vitess.io/vitess/go/vt/vtgate/vindexes"
)

// Reads of a stream of customer.customer end at markers rather than at the
// last expected row, so that duplicates are looked for through the end.
//
// A read takes rows until every row it expects has arrived (rows are told
// apart by email, unique per written row), then rows written after that:
// its end markers, one in each sixteenth of the keyspace-id space, so
// every shard of a layout cut at multiples of 0x10 (0, -80,80-, four
// shards, …) holds one. Per shard, rows arrive in commit order, and every
// marker committed after every expected row of its shard had arrived: once
// all markers are in, any repeat the gateway sends of an expected row ahead
// of a marker has been read. The markers are deterministic, where a quiet
// period would be a guess: it costs a fixed sleep per read, and a
// duplicate sent just after it goes unseen all the same.
//
// Readers reading at once share their markers (readEnd): they are written
// once the last of them has all its rows, which every reader then reads.

// markerSuffix ends the email of every end marker; readers skip markers,
// their own included.
const markerSuffix = "@e2e-end"

// readEnd is the end of a read shared by readers reading at once.
type readEnd struct {
	id    string
	write func(ctx context.Context, id string) error // writes the markers: writeEndMarkers

	mu      sync.Mutex
	waiting int                       // readers that do not have all their rows yet
	cancels []context.CancelCauseFunc // of the readers, if the markers fail
}

var readEnds atomic.Uint64

// newReadEnd returns the end of readers reads. Every one of them must call
// readTo, or skip if it cannot read at all: the markers wait for them.
func newReadEnd(readers int) *readEnd {
	return &readEnd{id: fmt.Sprintf("%d.%d", os.Getpid(), readEnds.Add(1)), write: writeEndMarkers, waiting: readers}
}

// skip counts out a reader that will not read (it could not connect).
func (e *readEnd) skip() { e.arrive(context.Background()) }

func (e *readEnd) join(cancel context.CancelCauseFunc) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.cancels = append(e.cancels, cancel)
}

// arrive counts a reader that has every row it expects, or gave up; the
// last one writes the markers. If that fails, the readers stop with why.
func (e *readEnd) arrive(ctx context.Context) {
	e.mu.Lock()
	e.waiting--
	last := e.waiting == 0
	e.mu.Unlock()
	if !last {
		return
	}
	if err := e.write(ctx, e.id); err != nil {
		e.mu.Lock()
		defer e.mu.Unlock()
		for _, cancel := range e.cancels {
			cancel(fmt.Errorf("end markers not written: %w", err))
		}
	}
}

// readUntil reads c until every row of want has arrived, and then until
// its end markers have (see above). It returns the change events read,
// repeats and unexpected rows included, markers left out.
func readUntil(ctx context.Context, c client, want []string) ([]ev, error) {
	return readTo(ctx, c, want, newReadEnd(1), nil)
}

// readTo is readUntil for one of the readers sharing end; seen, if not
// nil, is called with every event read (control events included).
func readTo(ctx context.Context, c client, want []string, end *readEnd, seen func(ev)) ([]ev, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	end.join(cancel)
	arrived := false
	arrive := func() {
		if !arrived {
			arrived = true
			end.arrive(ctx)
		}
	}
	defer arrive() // a reader that fails must not hold the others' markers back

	missing := map[string]bool{}
	for _, e := range want {
		missing[e] = true
	}
	marks, total := map[int]bool{}, -1 // own markers seen, of total
	var got []ev
	for {
		if len(missing) == 0 {
			arrive()
			if len(marks) == total {
				return got, nil
			}
		}
		e, err := c.next(ctx)
		if err != nil {
			if cause := context.Cause(ctx); cause != nil && ctx.Err() != nil {
				err = cause
			}
			ends := "no end marker seen"
			if total >= 0 {
				ends = fmt.Sprintf("%d of %d end markers seen", len(marks), total)
			}
			var some []string
			for _, e := range want {
				if missing[e] && len(some) < 5 {
					some = append(some, e)
				}
			}
			return got, fmt.Errorf("%w (%d rows still missing, among them %v; %s)", err, len(missing), some, ends)
		}
		if seen != nil {
			seen(e)
		}
		if e.Type != "change" {
			continue
		}
		email := e.str("email")
		if strings.HasSuffix(email, markerSuffix) {
			if id, i, n, ok := parseMarker(email); ok && id == end.id {
				marks[i], total = true, n
			}
			continue
		}
		got = append(got, e)
		delete(missing, email)
	}
}

// markerEmail names marker i of the n of end id.
func markerEmail(id string, i, n int) string {
	return fmt.Sprintf("end-%s-%d-of-%d%s", id, i, n, markerSuffix)
}

func parseMarker(email string) (id string, i, n int, ok bool) {
	f := strings.Split(strings.TrimSuffix(strings.TrimPrefix(email, "end-"), markerSuffix), "-")
	if len(f) != 4 || f[2] != "of" {
		return "", 0, 0, false
	}
	i, err1 := strconv.Atoi(f[1])
	n, err2 := strconv.Atoi(f[3])
	return f[0], i, n, err1 == nil && err2 == nil
}

// markerSlices is how many markers end a read: one per sixteenth of the
// keyspace-id space.
const markerSlices = 16

var markerDB struct {
	once sync.Once
	db   *sql.DB
	err  error
}

// writeEndMarkers inserts the markers of end id, in one statement.
func writeEndMarkers(ctx context.Context, id string) error {
	markerDB.once.Do(func() { markerDB.db, markerDB.err = cluster.OpenDB("customer") })
	if markerDB.err != nil {
		return markerDB.err
	}
	ids, err := markerIDs()
	if err != nil {
		return err
	}
	q := "insert into customer(customer_id, email) values " + strings.TrimSuffix(strings.Repeat("(?, ?),", len(ids)), ",")
	var args []any
	for i, cid := range ids {
		args = append(args, cid, markerEmail(id, i, len(ids)))
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_, err = markerDB.db.ExecContext(ctx, q, args...)
	return err
}

// markerIDs returns a customer_id for each sixteenth of the keyspace-id
// space, by customer's vindex (xxhash). The ids are far above what
// customer_seq hands out, from a random start so that runs against one
// cluster do not collide.
func markerIDs() ([]int64, error) {
	nextMarker.Lock()
	defer nextMarker.Unlock()
	if nextMarker.id == 0 {
		nextMarker.id = 1<<52 | rand.Int64N(1<<48)
	}
	ids := make([]int64, markerSlices)
	for filled := 0; filled < markerSlices; nextMarker.id++ {
		ksid, err := xxhashVindex.Hash(sqltypes.NewInt64(nextMarker.id))
		if err != nil {
			return nil, err
		}
		if s := int(ksid[0]) * markerSlices / 256; ids[s] == 0 {
			ids[s] = nextMarker.id
			filled++
		}
	}
	return ids, nil
}

var nextMarker struct {
	sync.Mutex
	id int64
}

// xxhashVindex maps customer_id to keyspace ids as customer's vschema does.
var xxhashVindex = func() vindexes.Hashing {
	v, err := vindexes.CreateVindex("xxhash", "xxhash", nil)
	if err != nil {
		panic(err)
	}
	return v.(vindexes.Hashing)
}()
