// Package cursor turns stream positions (Vitess VGtids) into the opaque
// cursor tokens clients hold, and back.
//
// A token is versioned, URL-safe, at most MaxTokenLen bytes and signed with a
// key shared by all gateway replicas, so a token minted by one replica
// resumes on another, and a forged or truncated token is refused before it
// reaches vtgate (where an unknown GTID would make the stream retry silently
// forever). Small VGtids travel inside the token, so a client can resume
// even if the store was lost; VGtids too large for a token (many shards, or
// a copy phase with table primary keys) are stored and the token references
// them.
//
// Layout, version 1:
//
//	"1" base64url( kind | payload | mac[:macLen] )
//
// kind 'i' (inline): payload is the protobuf VGtid, raw or (kind 'z')
// DEFLATE-compressed. kind 'r' (reference): payload is a 16-byte id of a
// stored VGtid. mac is HMAC-SHA256(key, stream | 0 | kind | payload), so a
// token is bound to its stream.
//
// Version 2 is a position inside a transaction delivered in pieces (a pull
// page that ended inside a huge one, DESIGN §3.1): the position before the
// transaction and how many of its events were delivered already.
//
//	"2" base64url( uvarint(skip) | kind | payload | mac[:macLen] )
//
// with mac = HMAC-SHA256(key, stream | 0 | "2" | uvarint(skip) | kind |
// payload). Only such positions get version 2: every other token is
// version 1 as before, and version 1 tokens stay valid. Decode reads a
// version 2 token as the position before its transaction (the transaction
// is the unit: acknowledging one acknowledges what precedes it); DecodeIn
// returns the events to skip as well.
package cursor

import (
	"bytes"
	"compress/flate"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"

	"github.com/vstream-gateway/vstream-gateway/position"
)

const (
	// MaxTokenLen is the longest token the codec produces or accepts.
	MaxTokenLen = 1024
	version     = '1'
	versionIn   = '2' // a position inside a transaction
	macLen      = 12
	kindInline  = 'i'
	kindDeflate = 'z'
	kindRef     = 'r'
	refIDLen    = 16
	// compressAbove is the payload size from which DEFLATE is tried: below it
	// the header costs more than it saves.
	compressAbove = 160
)

var b64 = base64.RawURLEncoding

// maxInlinePayload keeps inline tokens within MaxTokenLen.
var maxInlinePayload = b64.DecodedLen(MaxTokenLen-1) - 1 - macLen

// ErrInvalid is the sentinel behind every decode failure; the wrapping
// *Error says what exactly was wrong, in words fit for an API client.
var ErrInvalid = errors.New("invalid cursor")

// Error is a decode failure.
type Error struct {
	Reason string
	Err    error // optional cause
}

func (e *Error) Error() string {
	if e.Err != nil {
		return "invalid cursor: " + e.Reason + ": " + e.Err.Error()
	}
	return "invalid cursor: " + e.Reason
}

// Unwrap lets errors.Is(err, ErrInvalid) hold for every decode failure.
func (e *Error) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrInvalid, e.Err}
	}
	return []error{ErrInvalid}
}

func invalid(reason string) error { return &Error{Reason: reason} }

// RefStore keeps VGtids that are too large to travel inside a token.
type RefStore interface {
	PutRef(ctx context.Context, id string, data []byte) error
	GetRef(ctx context.Context, id string) ([]byte, error)
}

// Codec encodes and decodes tokens. It is safe for concurrent use.
type Codec struct {
	key  []byte
	refs RefStore
}

// NewCodec returns a codec signing with key (at least 16 bytes). refs may be
// nil, in which case VGtids too large for a token fail to encode.
func NewCodec(key []byte, refs RefStore) (*Codec, error) {
	if len(key) < 16 {
		return nil, fmt.Errorf("cursor: signing key must be at least 16 bytes, got %d", len(key))
	}
	return &Codec{key: bytes.Clone(key), refs: refs}, nil
}

func (c *Codec) mac(stream string, kind byte, payload []byte) []byte {
	h := hmac.New(sha256.New, c.key)
	io.WriteString(h, stream)
	h.Write([]byte{0, kind})
	h.Write(payload)
	return h.Sum(nil)[:macLen]
}

func (c *Codec) seal(stream string, kind byte, payload []byte) string {
	body := make([]byte, 0, 1+len(payload)+macLen)
	body = append(body, kind)
	body = append(body, payload...)
	body = append(body, c.mac(stream, kind, payload)...)
	out := make([]byte, 1+b64.EncodedLen(len(body)))
	out[0] = version
	b64.Encode(out[1:], body)
	return string(out)
}

// sealIn is seal for version 2: the skip count goes first, under the mac.
func (c *Codec) sealIn(stream string, skip uint64, kind byte, payload []byte) string {
	head := binary.AppendUvarint([]byte{versionIn}, skip)
	h := hmac.New(sha256.New, c.key)
	io.WriteString(h, stream)
	h.Write([]byte{0})
	h.Write(head)
	h.Write([]byte{kind})
	h.Write(payload)
	body := make([]byte, 0, len(head)+len(payload)+macLen)
	body = append(body, head[1:]...)
	body = append(body, kind)
	body = append(body, payload...)
	body = append(body, h.Sum(nil)[:macLen]...)
	out := make([]byte, 1+b64.EncodedLen(len(body)))
	out[0] = versionIn
	b64.Encode(out[1:], body)
	return string(out)
}

// Encode returns the token for vgtid on stream.
func (c *Codec) Encode(ctx context.Context, stream string, vgtid *binlogdatapb.VGtid) (string, error) {
	return c.EncodeIn(ctx, stream, vgtid, 0)
}

// EncodeIn returns the token for a position inside a transaction: vgtid is
// the position before it, skip how many of its events were delivered (0:
// the plain token of vgtid, as Encode makes).
func (c *Codec) EncodeIn(ctx context.Context, stream string, vgtid *binlogdatapb.VGtid, skip int) (string, error) {
	if vgtid == nil || len(vgtid.ShardGtids) == 0 {
		return "", errors.New("cursor: cannot encode an empty VGtid")
	}
	if skip < 0 {
		return "", errors.New("cursor: negative event count")
	}
	raw, err := position.Of(vgtid).Marshal()
	if err != nil {
		return "", fmt.Errorf("cursor: marshal VGtid: %w", err)
	}
	seal := func(kind byte, payload []byte) string {
		if skip == 0 {
			return c.seal(stream, kind, payload)
		}
		return c.sealIn(stream, uint64(skip), kind, payload)
	}
	kind, payload := byte(kindInline), raw
	if len(raw) > compressAbove {
		if z := deflate(raw); len(z) < len(raw) {
			kind, payload = kindDeflate, z
		}
	}
	// The skip count takes room from the payload.
	room := maxInlinePayload
	if skip > 0 {
		room -= len(binary.AppendUvarint(nil, uint64(skip)))
	}
	if len(payload) <= room {
		return seal(kind, payload), nil
	}
	if c.refs == nil {
		return "", fmt.Errorf("cursor: VGtid of %d bytes does not fit in a token and no reference store is configured", len(raw))
	}
	// Content-addressed: the same VGtid always maps to the same id, so
	// re-encoding a position (every reconnect) does not grow the store.
	sum := sha256.Sum256(raw)
	id := sum[:refIDLen]
	if err := c.refs.PutRef(ctx, b64.EncodeToString(id), raw); err != nil {
		return "", fmt.Errorf("cursor: store large VGtid: %w", err)
	}
	return seal(kindRef, id), nil
}

// Decode checks token's signature and stream binding and returns its VGtid
// (for a position inside a transaction, the position before it).
// Every failure wraps ErrInvalid; a reference whose stored VGtid is gone
// reports so.
func (c *Codec) Decode(ctx context.Context, stream, token string) (*binlogdatapb.VGtid, error) {
	v, _, err := c.DecodeIn(ctx, stream, token)
	return v, err
}

// DecodeIn is Decode that also returns how many events of the transaction
// after the position were delivered already (0 but for version 2 tokens).
func (c *Codec) DecodeIn(ctx context.Context, stream, token string) (*binlogdatapb.VGtid, int, error) {
	switch {
	case token == "":
		return nil, 0, invalid("empty token")
	case len(token) > MaxTokenLen:
		return nil, 0, invalid(fmt.Sprintf("token longer than %d bytes", MaxTokenLen))
	case token[0] != version && token[0] != versionIn:
		return nil, 0, invalid(fmt.Sprintf("unknown token version %q", token[0]))
	}
	body, err := b64.DecodeString(token[1:])
	if err != nil {
		return nil, 0, invalid("not URL-safe base64")
	}
	var skip uint64
	if token[0] == versionIn {
		n := 0
		if skip, n = binary.Uvarint(body); n <= 0 || skip == 0 || skip > 1<<40 {
			return nil, 0, invalid("bad event count")
		}
		head := binary.AppendUvarint([]byte{versionIn}, skip)
		if len(body) < n+1+macLen {
			return nil, 0, invalid("token too short")
		}
		kind, payload, sig := body[n], body[n+1:len(body)-macLen], body[len(body)-macLen:]
		h := hmac.New(sha256.New, c.key)
		io.WriteString(h, stream)
		h.Write([]byte{0})
		h.Write(head)
		h.Write([]byte{kind})
		h.Write(payload)
		if !hmac.Equal(sig, h.Sum(nil)[:macLen]) {
			return nil, 0, invalid("signature mismatch (forged, truncated, or minted for another stream)")
		}
		v, err := c.decodeBody(ctx, kind, payload)
		return v, int(skip), err
	}
	if len(body) < 1+macLen {
		return nil, 0, invalid("token too short")
	}
	kind, payload, sig := body[0], body[1:len(body)-macLen], body[len(body)-macLen:]
	if !hmac.Equal(sig, c.mac(stream, kind, payload)) {
		return nil, 0, invalid("signature mismatch (forged, truncated, or minted for another stream)")
	}
	v, err := c.decodeBody(ctx, kind, payload)
	return v, 0, err
}

// decodeBody turns a signed token's kind and payload into its VGtid.
func (c *Codec) decodeBody(ctx context.Context, kind byte, payload []byte) (*binlogdatapb.VGtid, error) {
	var (
		raw []byte
		err error
	)
	switch kind {
	case kindInline:
		raw = payload
	case kindDeflate:
		if raw, err = inflate(payload); err != nil {
			return nil, &Error{Reason: "corrupt compressed payload", Err: err}
		}
	case kindRef:
		if len(payload) != refIDLen {
			return nil, invalid("bad reference length")
		}
		if c.refs == nil {
			return nil, invalid("reference tokens are not supported by this gateway")
		}
		if raw, err = c.refs.GetRef(ctx, b64.EncodeToString(payload)); err != nil {
			return nil, &Error{Reason: "referenced position is not stored", Err: err}
		}
	default:
		return nil, invalid(fmt.Sprintf("unknown token kind %q", kind))
	}
	pos, err := position.Unmarshal(raw)
	if err != nil {
		var pe *position.Error
		if errors.As(err, &pe) && pe.Err != nil {
			err = pe.Err // the reason already says "corrupt position"
		}
		return nil, &Error{Reason: "corrupt position", Err: err}
	}
	vgtid := pos.VGtid()
	if err := Validate(vgtid); err != nil {
		return nil, err
	}
	return vgtid, nil
}

// Validate checks the structural rules every position must follow.
func Validate(vgtid *binlogdatapb.VGtid) error {
	if len(vgtid.GetShardGtids()) == 0 {
		return invalid("position has no shards")
	}
	seen := make(map[string]bool, len(vgtid.ShardGtids))
	for _, sg := range vgtid.ShardGtids {
		if sg.GetKeyspace() == "" {
			return invalid("position has a shard without keyspace")
		}
		k := sg.Keyspace + "/" + sg.Shard
		if seen[k] {
			return invalid("position lists shard " + k + " twice")
		}
		seen[k] = true
	}
	return nil
}

// maxInflate bounds decompression so a crafted token cannot expand into a
// huge allocation.
const maxInflate = 64 << 10

func deflate(b []byte) []byte {
	var buf bytes.Buffer
	w, _ := flate.NewWriter(&buf, flate.BestSpeed)
	w.Write(b)
	w.Close()
	return buf.Bytes()
}

func inflate(b []byte) ([]byte, error) {
	r := flate.NewReader(bytes.NewReader(b))
	defer r.Close()
	out, err := io.ReadAll(io.LimitReader(r, maxInflate+1))
	if err != nil {
		return nil, err
	}
	if len(out) > maxInflate {
		return nil, errors.New("payload too large")
	}
	return out, nil
}
