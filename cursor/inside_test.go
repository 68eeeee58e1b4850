package cursor

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
)

// A position inside a transaction (version 2) round-trips with its event
// count, inline and by reference; Decode reads it as the position before
// the transaction; version 1 tokens decode with no count, and a zero count
// makes a version 1 token.
func TestTokenInsideTransaction(t *testing.T) {
	c, _ := testCodec(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		shard []string
		skip  int
	}{
		{"inline", []string{"0"}, 1},
		{"inline, large count", []string{"-80", "80-"}, 1 << 30},
		{"reference", manyShards(), 300},
	} {
		v := vgtid(tc.shard...)
		tok, err := c.EncodeIn(ctx, "orders", v, tc.skip)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if tok[0] != '2' || len(tok) > MaxTokenLen {
			t.Fatalf("%s: token %q", tc.name, tok)
		}
		got, skip, err := c.DecodeIn(ctx, "orders", tok)
		if err != nil || skip != tc.skip || !proto.Equal(got, v) {
			t.Fatalf("%s: DecodeIn = %v, %d, %v; want %v, %d", tc.name, got, skip, err, v, tc.skip)
		}
		if got, err := c.Decode(ctx, "orders", tok); err != nil || !proto.Equal(got, v) {
			t.Fatalf("%s: Decode = %v, %v; want the position before the transaction", tc.name, got, err)
		}
		if _, _, err := c.DecodeIn(ctx, "customers", tok); err == nil || !strings.Contains(err.Error(), "signature mismatch") {
			t.Fatalf("%s: another stream's: %v", tc.name, err)
		}
		// The count is signed: changing it breaks the signature.
		body, _ := b64.DecodeString(tok[1:])
		body[0] ^= 2
		if _, _, err := c.DecodeIn(ctx, "orders", tok[:1]+b64.EncodeToString(body)); err == nil {
			t.Fatalf("%s: a token with its count changed was accepted", tc.name)
		}
	}
	plain, _ := c.Encode(ctx, "orders", vgtid("0"))
	if zero, _ := c.EncodeIn(ctx, "orders", vgtid("0"), 0); zero != plain {
		t.Fatalf("EncodeIn with no events delivered: %q, want the version 1 token %q", zero, plain)
	}
	if _, skip, err := c.DecodeIn(ctx, "orders", plain); err != nil || skip != 0 {
		t.Fatalf("a version 1 token: count %d, %v", skip, err)
	}
	// A version 2 token must count something.
	bad := c.sealIn("orders", 0, kindInline, []byte("x"))
	if _, _, err := c.DecodeIn(ctx, "orders", bad); err == nil || !strings.Contains(err.Error(), "bad event count") {
		t.Fatalf("a count of 0: %v", err)
	}
}

func manyShards() []string {
	var out []string
	for i := range 64 {
		out = append(out, strings.Repeat("a", 8)+string(rune('a'+i%26))+string(rune('a'+i/26)))
	}
	return out
}
