package storetest

import (
	"context"
	"fmt"
	"testing"

	"github.com/vstream-gateway/vstream-gateway/store"
)

// benchValue is the size of a typical stored record (a cursor or a stream
// definition).
var benchValue = make([]byte, 256)

// BenchPut measures Put of a 256-byte value over a rotating set of keys.
func BenchPut(b *testing.B, s store.Store) {
	ctx := context.Background()
	b.SetBytes(int64(len(benchValue)))
	i := 0
	for b.Loop() {
		if err := s.Put(ctx, "bench", fmt.Sprint(i%1024), benchValue); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchPutFenced measures PutFenced with a held lease.
func BenchPutFenced(b *testing.B, s store.Store) {
	ctx := context.Background()
	l, err := s.AcquireLease(ctx, "bench", "bench", LongTTL)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(benchValue)))
	i := 0
	for b.Loop() {
		if err := s.PutFenced(ctx, "bench", fmt.Sprint(i%1024), benchValue, l.Name, l.Token); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchAppend measures appending one 256-byte value to a log, trimming now
// and then so the log stays small as it would in a spool.
func BenchAppend(b *testing.B, s store.Store) {
	ctx := context.Background()
	b.SetBytes(int64(len(benchValue)))
	i := 0
	for b.Loop() {
		last, err := s.Append(ctx, "bench", benchValue)
		if err != nil {
			b.Fatal(err)
		}
		if i++; i%4096 == 0 {
			b.StopTimer()
			if err := s.TrimLog(ctx, "bench", last); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
	}
}
