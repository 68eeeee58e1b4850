package client

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"
)

// decoder turns the gateway's JSON into wireEvents. Row changes are
// nearly all of a stream and always have the same members, so they are
// read by a scanner made for them, several times faster than
// encoding/json (which cost an application 5 µs per row): their column
// images are kept as slices of one copy of the message, and the strings
// that repeat from row to row (keyspace, shard, table, op, cursor) are
// made once. Anything else (control events, a member the scanner does
// not know, an escaped string) is decoded by encoding/json, which also
// reports what is malformed.
type decoder struct {
	strs   map[string]string // interned strings, reset when full
	lastTS string            // the last commit_ts read, and its time
	lastAt time.Time
}

// maxInterned bounds the interned strings (a stream of many tables or
// shards reads past it now and then, and starts over).
const maxInterned = 1024

var errNotFast = errors.New("not for the fast path")

// message decodes a WebSocket message: one event, or (batch=txn) an array
// of them. msg is not kept: the events refer to a copy.
func (d *decoder) message(msg []byte) ([]wireEvent, error) {
	msg = append([]byte(nil), msg...)
	i := skipSpace(msg, 0)
	if i < len(msg) && msg[i] == '[' {
		return d.array(msg)
	}
	evs := make([]wireEvent, 1)
	return evs, d.event(msg, &evs[0])
}

// array decodes a JSON array of events.
func (d *decoder) array(msg []byte) ([]wireEvent, error) {
	spans, ok := elements(msg)
	if !ok {
		var evs []wireEvent
		return evs, json.Unmarshal(msg, &evs)
	}
	evs := make([]wireEvent, len(spans))
	for k, s := range spans {
		if err := d.event(msg[s[0]:s[1]], &evs[k]); err != nil {
			return nil, err
		}
	}
	return evs, nil
}

// event decodes one event object into w (zero).
func (d *decoder) event(obj []byte, w *wireEvent) error {
	if d.fast(obj, w) == nil {
		return nil
	}
	*w = wireEvent{}
	return json.Unmarshal(obj, w)
}

// fast reads a row change whose members are all known and plain.
func (d *decoder) fast(obj []byte, w *wireEvent) error {
	return members(obj, func(name, v []byte) error {
		switch string(name) {
		case "type":
			return d.str(v, &w.Type)
		case "op":
			var op string
			err := d.str(v, &op)
			w.Op = Op(op)
			return err
		case "keyspace":
			return d.str(v, &w.Keyspace)
		case "shard":
			return d.str(v, &w.Shard)
		case "table":
			return d.str(v, &w.Table)
		case "cursor":
			return d.str(v, &w.Cursor)
		case "key":
			return image(v, &w.Key)
		case "before":
			return image(v, &w.Before)
		case "after":
			return image(v, &w.After)
		case "commit_ts":
			return d.time(v, &w.CommitTS)
		case "txn_end":
			if string(v) != "true" && string(v) != "false" {
				return errNotFast
			}
			w.TxnEnd = string(v) == "true"
			return nil
		}
		return errNotFast
	})
}

// str reads a string without escapes, interned.
func (d *decoder) str(v []byte, to *string) error {
	if len(v) < 2 || v[0] != '"' {
		return errNotFast
	}
	v = v[1 : len(v)-1]
	for _, c := range v {
		if c == '\\' || c < 0x20 {
			return errNotFast
		}
	}
	if !utf8.Valid(v) {
		return errNotFast // encoding/json replaces what is not UTF-8
	}
	if s, ok := d.strs[string(v)]; ok {
		*to = s
		return nil
	}
	if d.strs == nil || len(d.strs) >= maxInterned {
		d.strs = make(map[string]string, 64)
	}
	s := string(v)
	d.strs[s] = s
	*to = s
	return nil
}

// image keeps a row image: an object, or null (which event makes nil).
func image(v []byte, to *json.RawMessage) error {
	if v[0] != '{' && string(v) != "null" {
		return errNotFast
	}
	*to = json.RawMessage(v[:len(v):len(v)])
	return nil
}

// time reads commit_ts (a transaction's rows share it: parsed once).
func (d *decoder) time(v []byte, to *time.Time) error {
	if string(v) == "null" {
		return nil
	}
	if len(v) < 2 || v[0] != '"' {
		return errNotFast
	}
	s := v[1 : len(v)-1]
	if len(s) > 0 && string(s) == d.lastTS {
		*to = d.lastAt
		return nil
	}
	var t time.Time
	if err := t.UnmarshalJSON(v); err != nil {
		return errNotFast
	}
	d.lastTS, d.lastAt, *to = string(s), t, t
	return nil
}

// members calls f with the name and the raw value of each member of the
// object obj, in order, until f fails. Names with escapes, and anything
// that is not an object, are errNotFast.
func members(obj []byte, f func(name, value []byte) error) error {
	i := skipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return errNotFast
	}
	i = skipSpace(obj, i+1)
	if i < len(obj) && obj[i] == '}' {
		return trailing(obj, i+1)
	}
	for {
		end, plain := scanString(obj, i)
		if end < 0 || !plain {
			return errNotFast
		}
		name := obj[i+1 : end-1]
		i = skipSpace(obj, end)
		if i >= len(obj) || obj[i] != ':' {
			return errNotFast
		}
		i = skipSpace(obj, i+1)
		end = scanValue(obj, i)
		if end < 0 {
			return errNotFast
		}
		if err := f(name, obj[i:end]); err != nil {
			return err
		}
		i = skipSpace(obj, end)
		if i >= len(obj) {
			return errNotFast
		}
		switch obj[i] {
		case ',':
			i = skipSpace(obj, i+1)
		case '}':
			return trailing(obj, i+1)
		default:
			return errNotFast
		}
	}
}

// elements returns the spans of the values of the array arr.
func elements(arr []byte) ([][2]int, bool) {
	i := skipSpace(arr, 0)
	if i >= len(arr) || arr[i] != '[' {
		return nil, false
	}
	var spans [][2]int
	i = skipSpace(arr, i+1)
	if i < len(arr) && arr[i] == ']' {
		return spans, trailing(arr, i+1) == nil
	}
	for {
		end := scanValue(arr, i)
		if end < 0 {
			return nil, false
		}
		spans = append(spans, [2]int{i, end})
		i = skipSpace(arr, end)
		if i >= len(arr) {
			return nil, false
		}
		switch arr[i] {
		case ',':
			i = skipSpace(arr, i+1)
		case ']':
			return spans, trailing(arr, i+1) == nil
		default:
			return nil, false
		}
	}
}

func trailing(b []byte, i int) error {
	if skipSpace(b, i) != len(b) {
		return errNotFast
	}
	return nil
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// scanString returns the index after the string starting at b[i] (-1 if
// there is none), and whether it has no escape.
func scanString(b []byte, i int) (int, bool) {
	if i >= len(b) || b[i] != '"' {
		return -1, false
	}
	// Most strings have no escape: find the closing quote at memchr speed.
	q := bytes.IndexByte(b[i+1:], '"')
	if q < 0 {
		return -1, false
	}
	if bytes.IndexByte(b[i+1:i+1+q], '\\') < 0 {
		return i + 2 + q, true
	}
	plain := true
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			plain = false
			j++
		case '"':
			return j + 1, plain
		}
	}
	return -1, false
}

// scanValue returns the index after the value starting at b[i], -1 if it
// is not one. Objects and arrays are matched bracket for bracket (their
// insides are checked no further: a member kept raw is the gateway's
// JSON, and one that is not is found by whoever decodes it); literals
// must be null, true, false or made of number characters.
func scanValue(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch c := b[i]; {
	case c == '"':
		end, _ := scanString(b, i)
		return end
	case c == '{' || c == '[':
		return scanNested(b, i)
	default:
		j := i
		for j < len(b) && (b[j] >= 'a' && b[j] <= 'z' || b[j] >= '0' && b[j] <= '9' || b[j] == '-' || b[j] == '+' || b[j] == '.' || b[j] == 'E') {
			j++
		}
		switch lit := string(b[i:j]); {
		case j == i:
			return -1
		case lit == "null" || lit == "true" || lit == "false":
		case lit[0] == '-' || lit[0] >= '0' && lit[0] <= '9':
		default:
			return -1
		}
		return j
	}
}

// scanNested returns the index after the object or array at b[i].
func scanNested(b []byte, i int) int {
	var stack []byte
	for j := i; j < len(b); j++ {
		switch c := b[j]; c {
		case '"':
			end, _ := scanString(b, j)
			if end < 0 {
				return -1
			}
			j = end - 1
		case '{', '[':
			stack = append(stack, c)
		case '}', ']':
			if len(stack) == 0 || (c == '}') != (stack[len(stack)-1] == '{') {
				return -1
			}
			stack = stack[:len(stack)-1]
			if len(stack) == 0 {
				return j + 1
			}
		}
	}
	return -1
}

// page decodes a pull page ({"events":[…],"next_cursor":…,"up_to_date":…}).
func (d *decoder) page(body []byte) (*page, error) {
	body = append([]byte(nil), body...)
	p := &page{}
	err := members(body, func(name, v []byte) error {
		switch string(name) {
		case "events":
			evs, err := d.array(v)
			p.Events = evs
			return err
		case "next_cursor":
			return d.str(v, &p.NextCursor)
		case "up_to_date":
			p.UpToDate = string(v) == "true"
			return nil
		}
		return errNotFast
	})
	if errors.Is(err, errNotFast) {
		*p = page{}
		err = json.Unmarshal(body, p)
	}
	if err != nil {
		return nil, fmt.Errorf("a page that is not JSON: %w", err)
	}
	return p, nil
}
