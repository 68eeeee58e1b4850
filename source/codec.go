package source

import (
	"math/bits"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/mem"
)

// The VStream receive path is the gateway's hottest loop: a replaying
// client pulls hundreds of thousands of rows a second through it. Two
// costs of the stock gRPC set-up there are pure overhead:
//
//   - gRPC's default buffer pool zeroes every buffer it hands out, and its
//     tiers jump from 32 KiB to 1 MiB: a 100 KiB VStream response is
//     assembled in a freshly cleared 1 MiB buffer. recvPool has a tier for
//     every power of two and does not clear (each buffer is filled to its
//     length before it is read).
//   - Vitess's codec copies a multi-frame message into such a buffer even
//     when it arrived in one piece.
//
// Decoding itself stays vtprotobuf's UnmarshalVT, which copies what it
// keeps, so a buffer can go back to the pool as soon as it returns.

// recvPool is a mem.BufferPool with a sync.Pool per power of two from
// 256 B to 16 MiB that hands out buffers without zeroing them.
type recvPool struct {
	tiers [maxPoolShift + 1]sync.Pool
}

const (
	minPoolShift = 8
	maxPoolShift = 24
)

func (p *recvPool) Get(n int) *[]byte {
	k := minPoolShift
	if n > 1<<minPoolShift {
		k = bits.Len(uint(n - 1))
	}
	if k > maxPoolShift {
		b := make([]byte, n)
		return &b
	}
	if v, ok := p.tiers[k].Get().(*[]byte); ok {
		*v = (*v)[:n]
		return v
	}
	b := make([]byte, n, 1<<k)
	return &b
}

func (p *recvPool) Put(b *[]byte) {
	c := cap(*b)
	k := bits.Len(uint(c)) - 1
	if k < minPoolShift || k > maxPoolShift || c != 1<<k {
		return // not one of ours: let the GC have it
	}
	p.tiers[k].Put(b)
}

var sharedRecvPool = &recvPool{}

// vtCodec decodes with UnmarshalVT straight from the received bytes when
// they are contiguous, and otherwise through recvPool.
type vtCodec struct {
	fallback encoding.CodecV2 // whatever "proto" is registered (Vitess's codec)
	pool     mem.BufferPool
}

func (c vtCodec) Name() string { return c.fallback.Name() }

func (c vtCodec) Marshal(v any) (mem.BufferSlice, error) { return c.fallback.Marshal(v) }

func (c vtCodec) Unmarshal(data mem.BufferSlice, v any) error {
	m, ok := v.(interface{ UnmarshalVT([]byte) error })
	if !ok {
		return c.fallback.Unmarshal(data, v)
	}
	if len(data) == 1 {
		return m.UnmarshalVT(data[0].ReadOnlyData())
	}
	buf := data.MaterializeToBuffer(c.pool)
	defer buf.Free()
	return m.UnmarshalVT(buf.ReadOnlyData())
}

// fastRecvOptions are the dial options that install recvPool and vtCodec.
func fastRecvOptions() []grpc.DialOption {
	return []grpc.DialOption{
		experimental.WithBufferPool(sharedRecvPool),
		grpc.WithDefaultCallOptions(grpc.ForceCodecV2(vtCodec{fallback: encoding.GetCodecV2("proto"), pool: sharedRecvPool})),
	}
}
