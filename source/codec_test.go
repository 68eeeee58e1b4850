package source

import (
	"testing"

	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"
	querypb "vitess.io/vitess/go/vt/proto/query"
	vtgatepb "vitess.io/vitess/go/vt/proto/vtgate"
)

func TestRecvPoolSizes(t *testing.T) {
	p := &recvPool{}
	for _, n := range []int{0, 1, 255, 256, 257, 4096, 100 << 10, 1 << 20, 16 << 20, 16<<20 + 1} {
		b := p.Get(n)
		if len(*b) != n {
			t.Fatalf("Get(%d): len %d", n, len(*b))
		}
		if c := cap(*b); c < n || (n <= 16<<20 && c&(c-1) != 0) {
			t.Fatalf("Get(%d): cap %d", n, c)
		}
		p.Put(b)
	}
	// A pooled buffer comes back for the next request of its tier.
	b := p.Get(3000)
	(*b)[0] = 42
	p.Put(b)
	if c := p.Get(2500); cap(*c) != 4096 {
		t.Fatalf("tier 4 KiB gave cap %d", cap(*c))
	}
	// Buffers of a foreign size are not kept: they could be too small.
	odd := make([]byte, 3000)
	p.Put(&odd)
	for range 10 {
		if c := p.Get(3000); cap(*c) < 3000 {
			t.Fatalf("got a %d-byte buffer for 3000", cap(*c))
		}
	}
}

// TestCodecSplitMessage decodes a VStream response that arrived in one
// piece and in many, and compares with the plain proto decoding.
func TestCodecSplitMessage(t *testing.T) {
	resp := &vtgatepb.VStreamResponse{Events: []*binlogdatapb.VEvent{{
		Type: binlogdatapb.VEventType_ROW,
		RowEvent: &binlogdatapb.RowEvent{TableName: "customer", Shard: "-80", RowChanges: []*binlogdatapb.RowChange{
			{After: &querypb.Row{Lengths: []int64{1, 17}, Values: []byte("1bench@example.com")}},
			{Before: &querypb.Row{Lengths: []int64{1, -1}, Values: []byte("2")}},
		}},
	}}}
	raw, err := proto.Marshal(resp)
	if err != nil {
		t.Fatal(err)
	}
	codec := vtCodec{fallback: encoding.GetCodecV2("proto"), pool: &recvPool{}}
	whole := mem.BufferSlice{mem.SliceBuffer(raw)}
	var split mem.BufferSlice
	for i := 0; i < len(raw); i += 7 {
		split = append(split, mem.SliceBuffer(raw[i:min(i+7, len(raw))]))
	}
	for name, data := range map[string]mem.BufferSlice{"whole": whole, "split": split} {
		var got vtgatepb.VStreamResponse
		if err := codec.Unmarshal(data, &got); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !proto.Equal(&got, resp) {
			t.Fatalf("%s: decoded %v, want %v", name, &got, resp)
		}
	}
	// What was decoded does not alias the received bytes.
	var got vtgatepb.VStreamResponse
	if err := codec.Unmarshal(whole, &got); err != nil {
		t.Fatal(err)
	}
	clear(raw)
	if !proto.Equal(&got, resp) {
		t.Fatal("the decoded message changed with the buffer it came from")
	}
}
