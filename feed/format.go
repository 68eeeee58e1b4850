package feed

import (
	"context"
	"errors"

	"github.com/vstream-gateway/vstream-gateway/event"
	"github.com/vstream-gateway/vstream-gateway/event/debezium"
	"github.com/vstream-gateway/vstream-gateway/hub"
	"github.com/vstream-gateway/vstream-gateway/source"
)

// Format names for the format parameter (pull, SSE, WebSocket) and a
// webhook's "format".
const (
	FormatDefault  = "default"
	FormatDebezium = "debezium"
)

// ErrFormat is the error of an unknown format name.
var ErrFormat = errors.New(`format must be "default" or "debezium"`)

// ErrSchemas is the error of schemas asked of the default format.
var ErrSchemas = errors.New(`schemas applies to format "debezium" only`)

// Format re-encodes what a reader receives in another event format
// (DESIGN §3.2). A nil *Format is the default format: deliveries pass as
// they are.
type Format struct {
	dbz debezium.Options
	key string
}

// NewFormat returns the format named name ("" or "default": nil) for
// stream; schemas asks for Debezium's {schema, payload} documents.
func NewFormat(name string, schemas bool, stream string) (*Format, error) {
	switch name {
	case "", FormatDefault:
		if schemas {
			return nil, ErrSchemas
		}
		return nil, nil
	case FormatDebezium:
		o := debezium.Options{Stream: stream, Schemas: schemas}
		return &Format{dbz: o, key: o.Key()}, nil
	}
	return nil, ErrFormat
}

// Apply returns d with its events in the format. The re-encoded events
// are made once per transaction and format, and shared by every reader
// that asks for them (source.Txn.Encoded); d is not modified.
func (f *Format) Apply(d *hub.Delivery) *hub.Delivery {
	if f == nil || d == nil || !hasChange(d.Events) {
		return d
	}
	evs := d.Txn.Encoded(f.key, f.encode)
	txn := *d.Txn
	txn.Events = evs
	return &hub.Delivery{Txn: &txn, Cursor: d.Cursor}
}

func (f *Format) encode(t *source.Txn) []event.Event {
	return debezium.Encode(debezium.Txn{
		Events: t.Events, VGtid: t.VGtid, CommitTS: t.CommitTS, Received: t.Received, Chunked: t.Chunked(),
	}, f.dbz)
}

func hasChange(evs []event.Event) bool {
	for i := range evs {
		if evs[i].Type == event.TypeChange {
			return true
		}
	}
	return false
}

// Formatted is r with every delivery in format f (nil: r itself). Readers
// that count what they collect (a webhook's batch_max_bytes) count the
// bytes they send.
func Formatted(r Reader, f *Format) Reader {
	if f == nil {
		return r
	}
	return Mapped(r, f.Apply)
}

// Mapped is r with apply applied to every delivery it returns: a step of
// the outbound path (a format, a token's scope) between a subscription and
// what reads it.
func Mapped(r Reader, apply func(*hub.Delivery) *hub.Delivery) Reader {
	return mapped{r, apply}
}

type mapped struct {
	Reader
	apply func(*hub.Delivery) *hub.Delivery
}

func (r mapped) Next(ctx context.Context) (*hub.Delivery, error) {
	d, err := r.Reader.Next(ctx)
	if err != nil {
		return d, err
	}
	return r.apply(d), nil
}

func (r mapped) TryNext(ctx context.Context) (*hub.Delivery, bool, error) {
	d, ok, err := r.Reader.TryNext(ctx)
	if !ok || err != nil {
		return d, ok, err
	}
	return r.apply(d), true, nil
}

// SplitCopy passes the collector's room on to a reader that can cut copy
// batches (copySplitter): a mapped reader pages a snapshot as the reader
// under it would.
func (r mapped) SplitCopy(rows int) {
	if cs, ok := r.Reader.(copySplitter); ok {
		cs.SplitCopy(rows)
	}
}
