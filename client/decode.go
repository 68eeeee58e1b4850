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
	strs    map[string]string // interned strings, reset when full
	last    [slots]string     // the last string read per member (str)
	seen    [slots]bool
	lastTS  string // the last commit_ts read, and its time
	lastAt  time.Time
	lastLen int // events in the last array: room for as many in the next
}

// maxInterned bounds the interned strings (a stream of many tables or
// shards reads past it now and then, and starts over).
const maxInterned = 1024

var errNotFast = errors.New("not for the fast path")

// message decodes a WebSocket message: one event, or (batch=txn) an array
// of them. The events refer to msg: the caller gives each message its
// own buffer.
func (d *decoder) message(msg []byte) ([]wireEvent, error) {
	i := skipSpace(msg, 0)
	if i < len(msg) && msg[i] == '[' {
		return d.array(msg)
	}
	evs := make([]wireEvent, 1)
	return evs, d.event(msg, &evs[0])
}

// array decodes a JSON array of events in one pass: each element is read
// by the scanner where it can be, by encoding/json where not.
func (d *decoder) array(msg []byte) ([]wireEvent, error) {
	evs, ok, err := d.elements(msg)
	if ok {
		return evs, err
	}
	evs = nil
	return evs, json.Unmarshal(msg, &evs)
}

// elements reads the array arr element by element; ok is false when arr
// is not a well-formed array as far as the scanner sees (encoding/json
// then reads it whole, and reports what is wrong).
func (d *decoder) elements(arr []byte) (evs []wireEvent, ok bool, err error) {
	i := skipSpace(arr, 0)
	if i >= len(arr) || arr[i] != '[' {
		return nil, false, nil
	}
	evs = make([]wireEvent, 0, d.lastLen)
	i = skipSpace(arr, i+1)
	if i < len(arr) && arr[i] == ']' {
		return evs, trailing(arr, i+1) == nil, nil
	}
	for {
		evs = append(evs, wireEvent{})
		w := &evs[len(evs)-1]
		end, ferr := membersAt(arr, i, d.member(w))
		if ferr != nil {
			if end = scanValue(arr, i); end < 0 {
				return nil, false, nil
			}
			*w = wireEvent{}
			if err := json.Unmarshal(arr[i:end], w); err != nil {
				return nil, true, err
			}
		}
		i = skipSpace(arr, end)
		if i >= len(arr) {
			return nil, false, nil
		}
		switch arr[i] {
		case ',':
			i = skipSpace(arr, i+1)
		case ']':
			d.lastLen = len(evs)
			return evs, trailing(arr, i+1) == nil, nil
		default:
			return nil, false, nil
		}
	}
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
	return members(obj, d.member(w))
}

// member reads one member of a row change into w; a member it does not
// know, or one that is not plain, is errNotFast.
func (d *decoder) member(w *wireEvent) func(name, v []byte) error {
	return func(name, v []byte) error {
		switch string(name) {
		case "type":
			return d.str(v, slotType, &w.Type)
		case "op":
			var op string
			err := d.str(v, slotOp, &op)
			w.Op = Op(op)
			return err
		case "keyspace":
			return d.str(v, slotKeyspace, &w.Keyspace)
		case "shard":
			return d.str(v, slotShard, &w.Shard)
		case "table":
			return d.str(v, slotTable, &w.Table)
		case "cursor":
			return d.str(v, slotCursor, &w.Cursor)
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
	}
}

// The members str remembers the last value of: consecutive rows nearly
// always repeat them, and comparing with the last one costs less than
// checking and interning the string again.
const (
	slotType = iota
	slotOp
	slotKeyspace
	slotShard
	slotTable
	slotCursor
	slots
)

// str reads a string without escapes, interned; slot names the member.
func (d *decoder) str(v []byte, slot int, to *string) error {
	if len(v) < 2 || v[0] != '"' {
		return errNotFast
	}
	v = v[1 : len(v)-1]
	if last := d.last[slot]; len(last) == len(v) && last == string(v) && (len(v) > 0 || d.seen[slot]) {
		*to = last
		return nil
	}
	for _, c := range v {
		if c == '\\' || c < 0x20 {
			return errNotFast
		}
	}
	if !utf8.Valid(v) {
		return errNotFast // encoding/json replaces what is not UTF-8
	}
	s, ok := d.strs[string(v)]
	if !ok {
		if d.strs == nil || len(d.strs) >= maxInterned {
			d.strs = make(map[string]string, 64)
		}
		s = string(v)
		d.strs[s] = s
	}
	d.last[slot], d.seen[slot] = s, true
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
	end, err := membersAt(obj, skipSpace(obj, 0), f)
	if err != nil {
		return err
	}
	return trailing(obj, end)
}

// membersAt is members for the object that starts at b[i]; it returns the
// index after the object.
func membersAt(b []byte, i int, f func(name, value []byte) error) (int, error) {
	if i >= len(b) || b[i] != '{' {
		return -1, errNotFast
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return i + 1, nil
	}
	for {
		end, plain := scanString(b, i)
		if end < 0 || !plain {
			return -1, errNotFast
		}
		name := b[i+1 : end-1]
		i = skipSpace(b, end)
		if i >= len(b) || b[i] != ':' {
			return -1, errNotFast
		}
		i = skipSpace(b, i+1)
		end = scanValue(b, i)
		if end < 0 {
			return -1, errNotFast
		}
		if err := f(name, b[i:end]); err != nil {
			return -1, err
		}
		i = skipSpace(b, end)
		if i >= len(b) {
			return -1, errNotFast
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case '}':
			return i + 1, nil
		default:
			return -1, errNotFast
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
			return d.str(v, slotCursor, &p.NextCursor)
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
