package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"vitess.io/vitess/go/vt/sqlparser"

	"github.com/vstream-gateway/vstream-gateway/event"
	"github.com/vstream-gateway/vstream-gateway/metrics"
	"github.com/vstream-gateway/vstream-gateway/source"
	"github.com/vstream-gateway/vstream-gateway/streams"
)

// Tables that vanish (DESIGN §4.1 rule 9). Without --vtctld a MoveTables
// cutover is not seen: after `complete` the source stream receives one
// DROP TABLE and then nothing, ever. A reader that sees its stream's
// tables dropped (or renamed away) reports a gap under the stream's
// on_gap instead of going silent: a `resync` (reason tables_dropped) and
// reading on (nothing more comes unless the tables come back), or, with
// on_gap fail, the stream ends with a TablesDroppedError (409) right
// before the DROP (see check).
//
// The same gap is met from the other side by a reader whose position is
// before the DROP when no tail holds it (a cursor read after a restart):
// vttablet refuses to stream the table's rows ahead of it, which the
// source reports as a *source.TableMissingError once vtgate confirms the
// table gone. That refusal gets the same answer under on_gap, the resync
// reading on from the live end (where the reader would have been, past
// the DROP), instead of a 502 and a client retrying into it forever.

// ResyncTablesDropped: the stream's tables were dropped from its keyspace.
const ResyncTablesDropped = "tables_dropped"

// TablesDroppedError ends a stream with on_gap fail whose tables were
// dropped.
type TablesDroppedError struct {
	Keyspace string
	Tables   []string
}

func (e *TablesDroppedError) Error() string {
	return fmt.Sprintf("the stream's tables %s were dropped from keyspace %s (a MoveTables complete moves them away: run the gateway with --vtctld to follow moves, or define the stream on their new keyspace)",
		strings.Join(e.Tables, ", "), e.Keyspace)
}

// droppedNotice is the message of a tables_dropped resync: the tables are
// its "tables" member, not words of it, since each reader gets those of
// its scope only (auth/control.go).
func droppedNotice(keyspace string) string {
	return "the stream's tables listed were dropped from keyspace " + keyspace +
		" (a MoveTables complete moves them away: run the gateway with --vtctld to follow moves, or define the stream on their new keyspace)"
}

var ddlParser = sqlparser.NewTestParser()

// droppedTables returns the tables of names that statement drops or
// renames away.
func droppedTables(statement string, names []string) []string {
	stmt, err := ddlParser.Parse(statement)
	if err != nil {
		return nil
	}
	var gone []string
	add := func(t sqlparser.TableName) {
		n := t.Name.String()
		for _, want := range names {
			if strings.EqualFold(n, want) && !slices.Contains(gone, want) {
				gone = append(gone, want)
			}
		}
	}
	switch s := stmt.(type) {
	case *sqlparser.DropTable:
		for _, t := range s.FromTables {
			add(t)
		}
	case *sqlparser.RenameTable:
		for _, p := range s.TablePairs {
			add(p.FromTable)
		}
	}
	slices.Sort(gone)
	return gone
}

// droppedWatch wraps a stream's VStream and reports its tables vanishing.
type droppedWatch struct {
	Stream
	u   *Upstream
	def *streams.Definition
	// ctx and spec reopen the stream at the live end after a resync for
	// a refused position.
	ctx  context.Context
	spec source.Spec
	out  []*source.Txn
	err  error
}

// watchDropped wraps src, the VStream of def opened under ctx with spec.
// A stream matching its tables by /regex/ has no names to compare a DROP
// with, but vttablet's refusal names the table it matched.
func (u *Upstream) watchDropped(ctx context.Context, def *streams.Definition, spec source.Spec, src Stream) Stream {
	return &droppedWatch{Stream: src, u: u, def: def, ctx: ctx, spec: spec}
}

func (w *droppedWatch) Next(ctx context.Context) (*source.Txn, error) {
	if t, ok, err := w.pending(); ok || err != nil {
		return t, err
	}
	t, err := w.Stream.Next(ctx)
	if err != nil {
		if err = w.refused(err); err == nil {
			return w.Next(ctx)
		}
		return nil, err
	}
	if t = w.check(t); t == nil {
		return nil, w.err
	}
	return t, nil
}

func (w *droppedWatch) TryNext() (*source.Txn, bool, error) {
	if t, ok, err := w.pending(); ok || err != nil {
		return t, ok, err
	}
	t, ok, err := w.Stream.TryNext()
	if err != nil {
		if err = w.refused(err); err == nil {
			return w.TryNext()
		}
		return nil, false, err
	}
	if !ok {
		return t, ok, err
	}
	if t = w.check(t); t == nil {
		return nil, false, w.err
	}
	return t, true, nil
}

// refused answers vttablet refusing the stream for a table that is gone
// (a *source.TableMissingError: the position is before the DROP, and no
// tail holds what followed) under the stream's on_gap: the
// TablesDroppedError with on_gap fail; with resync, nil after queueing
// the notice and reopening the stream at the live end — from the same
// position the refusal would come back, forever. Any other error is
// returned as it is.
func (w *droppedWatch) refused(err error) error {
	var tm *source.TableMissingError
	if !errors.As(err, &tm) {
		return err
	}
	gone := []string{tm.Table}
	for _, n := range w.def.TableNames() {
		if strings.EqualFold(n, tm.Table) {
			gone = []string{n}
		}
	}
	dropped := &TablesDroppedError{Keyspace: tm.Keyspace, Tables: gone}
	metrics.StreamTablesDropped(w.def.Name)
	w.u.log.Error("vttablet refuses a stream's position: its table is gone from the keyspace, with rows ahead of the position (a MoveTables complete without --vtctld?)",
		"stream", w.def.Name, "keyspace", tm.Keyspace, "tables", gone, "on_gap", w.def.OnGap, "err", err)
	if w.def.OnGap == streams.OnGapFail {
		w.err = dropped
		return dropped
	}
	live := source.NowPosition(w.spec.Keyspace)
	notice := event.Control(event.TypeResync, tm.Keyspace, "", map[string]any{
		"reason": ResyncTablesDropped, "tables": gone,
		"message": droppedNotice(tm.Keyspace) + "; the changes between the cursor and the DROP cannot be read: discard what you derived from earlier events of these tables",
	})
	w.out = append(w.out, &source.Txn{VGtid: live, Events: []event.Event{notice}, Received: time.Now()})
	w.Stream.Close()
	w.Stream = w.u.src.Open(w.ctx, w.spec, live)
	return nil
}

func (w *droppedWatch) Buffered() int { return len(w.out) + w.Stream.Buffered() }

func (w *droppedWatch) pending() (*source.Txn, bool, error) {
	if len(w.out) > 0 {
		t := w.out[0]
		w.out = w.out[1:]
		return t, true, nil
	}
	if w.err != nil {
		return nil, false, w.err
	}
	return nil, false, nil
}

// check passes t on and, when it drops the stream's tables, queues the
// gap's notice after it; with on_gap fail it returns nil instead, and the
// stream ends with w.err *before* the DROP: the reader's last cursor stays
// before it, so that reading on from that cursor, anywhere and any time
// later, meets the DROP again and ends the same way. Past the DROP there
// would be nothing to read, ever: silence.
func (w *droppedWatch) check(t *source.Txn) *source.Txn {
	for _, e := range t.Events {
		if e.Type != event.TypeDDL {
			continue
		}
		var m struct {
			Statement string `json:"statement"`
		}
		if json.Unmarshal(append(append([]byte(nil), e.JSON...), '}'), &m) != nil {
			continue
		}
		gone := droppedTables(m.Statement, w.def.TableNames()) // none for /regex/ tables
		if len(gone) == 0 {
			continue
		}
		ks := e.Keyspace
		if ks == "" {
			ks = w.def.Keyspace
		}
		metrics.StreamTablesDropped(w.def.Name)
		w.u.log.Error("a stream's tables were dropped from its keyspace: a gap (a MoveTables complete without --vtctld?)",
			"stream", w.def.Name, "keyspace", ks, "tables", gone, "statement", m.Statement, "on_gap", w.def.OnGap)
		if w.def.OnGap == streams.OnGapFail {
			w.err = &TablesDroppedError{Keyspace: ks, Tables: gone}
			return nil
		}
		notice := event.Control(event.TypeResync, ks, "", map[string]any{
			"reason": ResyncTablesDropped, "tables": gone,
			"message": droppedNotice(ks) + "; discard what you derived from earlier events of these tables",
		})
		w.out = append(w.out, &source.Txn{VGtid: t.VGtid, Events: []event.Event{notice}, Received: t.Received})
	}
	return t
}
