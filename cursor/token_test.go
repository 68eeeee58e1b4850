package cursor

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"google.golang.org/protobuf/proto"
	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"
	querypb "vitess.io/vitess/go/vt/proto/query"
)

type memRefs struct {
	mu sync.Mutex
	m  map[string][]byte
}

func (r *memRefs) PutRef(_ context.Context, id string, data []byte) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = map[string][]byte{}
	}
	r.m[id] = data
	return nil
}

func (r *memRefs) GetRef(_ context.Context, id string) ([]byte, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if d, ok := r.m[id]; ok {
		return d, nil
	}
	return nil, errors.New("not found")
}

func testCodec(t testing.TB) (*Codec, *memRefs) {
	refs := &memRefs{}
	c, err := NewCodec([]byte("0123456789abcdef0123456789abcdef"), refs)
	if err != nil {
		t.Fatal(err)
	}
	return c, refs
}

func vgtid(shards ...string) *binlogdatapb.VGtid {
	v := &binlogdatapb.VGtid{}
	for i, s := range shards {
		v.ShardGtids = append(v.ShardGtids, &binlogdatapb.ShardGtid{
			Keyspace: "customer", Shard: s, Gtid: fmt.Sprintf("MariaDB/0-1914418711-%d", 60+i),
		})
	}
	return v
}

// copyPhase builds a VGtid with table primary keys, as vtgate sends during
// a copy phase; with many tables it no longer fits a token.
func copyPhase(tables int) *binlogdatapb.VGtid {
	v := vgtid("-80", "80-")
	for _, sg := range v.ShardGtids {
		for i := 0; i < tables; i++ {
			sg.TablePKs = append(sg.TablePKs, &binlogdatapb.TableLastPK{
				TableName: fmt.Sprintf("t%x", sha256.Sum256([]byte{byte(i), byte(i >> 8)}))[:24],
				Lastpk: &querypb.QueryResult{
					Fields: []*querypb.Field{{Name: "id", Type: querypb.Type_INT64}},
					Rows:   []*querypb.Row{{Lengths: []int64{6}, Values: []byte(fmt.Sprintf("%06d", i*7919%1000000))}},
				},
			})
		}
	}
	return v
}

func TestRoundTrip(t *testing.T) {
	ctx := context.Background()
	c, refs := testCodec(t)
	for name, v := range map[string]*binlogdatapb.VGtid{
		"one shard":    vgtid("0"),
		"four shards":  vgtid("-40", "40-80", "80-c0", "c0-"),
		"copy phase":   copyPhase(3),
		"large":        copyPhase(60),
		"current":      {ShardGtids: []*binlogdatapb.ShardGtid{{Keyspace: "customer", Shard: "0", Gtid: "current"}}},
		"empty gtid":   {ShardGtids: []*binlogdatapb.ShardGtid{{Keyspace: "customer", Shard: "-80"}}},
		"many shards":  vgtid(strings.Split("-10,10-20,20-30,30-40,40-50,50-60,60-70,70-80,80-90,90-a0,a0-b0,b0-c0,c0-d0,d0-e0,e0-f0,f0-", ",")...),
		"two keyspace": {ShardGtids: []*binlogdatapb.ShardGtid{{Keyspace: "a", Shard: "0", Gtid: "x"}, {Keyspace: "b", Shard: "0", Gtid: "y"}}},
	} {
		t.Run(name, func(t *testing.T) {
			tok, err := c.Encode(ctx, "orders", v)
			if err != nil {
				t.Fatal(err)
			}
			if len(tok) > MaxTokenLen {
				t.Fatalf("token is %d bytes", len(tok))
			}
			for _, r := range tok {
				if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
					t.Fatalf("token has non-URL-safe rune %q: %s", r, tok)
				}
			}
			got, err := c.Decode(ctx, "orders", tok)
			if err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(got, v) {
				t.Fatalf("round trip changed the VGtid:\n got %v\nwant %v", got, v)
			}
		})
	}
	if len(refs.m) != 1 {
		t.Fatalf("expected exactly the large VGtid to be stored by reference, got %d refs", len(refs.m))
	}
}

func TestDecodeRejects(t *testing.T) {
	ctx := context.Background()
	c, _ := testCodec(t)
	good, err := c.Encode(ctx, "orders", vgtid("-80", "80-"))
	if err != nil {
		t.Fatal(err)
	}
	other, _ := NewCodec([]byte("another key of sixteen+ bytes"), nil)
	forged, _ := other.Encode(ctx, "orders", vgtid("0"))
	flip := []byte(good)
	flip[10] ^= 1
	for name, tc := range map[string]struct{ stream, tok, reason string }{
		"empty":          {"orders", "", "empty token"},
		"version":        {"orders", "3" + good[1:], "unknown token version"},
		"not base64":     {"orders", "1$$$$", "not URL-safe base64"},
		"short":          {"orders", "1AAAA", "too short"},
		"other stream":   {"customers", good, "signature mismatch"},
		"forged key":     {"orders", forged, "signature mismatch"},
		"bit flip":       {"orders", string(flip), ""},
		"truncated":      {"orders", good[:len(good)-3], ""},
		"too long":       {"orders", "1" + strings.Repeat("A", MaxTokenLen), "longer than"},
		"padding chars":  {"orders", good + "==", "base64"},
		"standard b64":   {"orders", "1+/+/+/+/+/+/+/+/+/+/", "base64"},
		"unknown kind":   {"orders", c.seal("orders", 'q', []byte("x")), "unknown token kind"},
		"garbage inline": {"orders", c.seal("orders", kindInline, []byte{0xff, 0xff, 0xff}), "corrupt position"},
		"no shards":      {"orders", c.seal("orders", kindInline, nil), "no shards"},
		"missing ref":    {"orders", c.seal("orders", kindRef, make([]byte, refIDLen)), "not stored"},
		"bad ref len":    {"orders", c.seal("orders", kindRef, []byte{1, 2}), "bad reference"},
		"bad deflate":    {"orders", c.seal("orders", kindDeflate, []byte{0xff, 0x00}), "corrupt compressed"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := c.Decode(ctx, tc.stream, tc.tok)
			if err == nil {
				t.Fatal("decoded a bad token")
			}
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
			if !strings.Contains(err.Error(), tc.reason) {
				t.Fatalf("error %q does not say %q", err, tc.reason)
			}
		})
	}
}

func TestDuplicateShardRejected(t *testing.T) {
	ctx := context.Background()
	c, _ := testCodec(t)
	v := vgtid("0", "0")
	tok, err := c.Encode(ctx, "s", v)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Decode(ctx, "s", tok); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Fatalf("want duplicate shard error, got %v", err)
	}
}

func TestShortKeyRefused(t *testing.T) {
	if _, err := NewCodec([]byte("short"), nil); err == nil {
		t.Fatal("accepted a 5-byte key")
	}
}

func FuzzDecode(f *testing.F) {
	ctx := context.Background()
	c, _ := testCodec(f)
	for _, v := range []*binlogdatapb.VGtid{vgtid("0"), vgtid("-80", "80-"), copyPhase(2), copyPhase(60)} {
		tok, err := c.Encode(ctx, "s", v)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(tok)
	}
	f.Add("")
	f.Add("1")
	f.Add("1AAAAAAAAAAAAAAAAAAAAAAAAAA")
	f.Fuzz(func(t *testing.T, tok string) {
		v, err := c.Decode(ctx, "s", tok)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("decode error does not wrap ErrInvalid: %v", err)
			}
			return
		}
		// Anything accepted must re-encode to a token that decodes to the
		// same position.
		again, err := c.Encode(ctx, "s", v)
		if err != nil {
			t.Fatalf("accepted position does not re-encode: %v", err)
		}
		v2, err := c.Decode(ctx, "s", again)
		if err != nil || !proto.Equal(v, v2) {
			t.Fatalf("re-encoded token differs: %v", err)
		}
	})
}

func BenchmarkEncode(b *testing.B) {
	ctx := context.Background()
	c, _ := testCodec(b)
	v := vgtid("-80", "80-")
	for b.Loop() {
		if _, err := c.Encode(ctx, "orders", v); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecode(b *testing.B) {
	ctx := context.Background()
	c, _ := testCodec(b)
	tok, _ := c.Encode(ctx, "orders", vgtid("-80", "80-"))
	for b.Loop() {
		if _, err := c.Decode(ctx, "orders", tok); err != nil {
			b.Fatal(err)
		}
	}
}
