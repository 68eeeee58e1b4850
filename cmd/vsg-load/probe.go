package main

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// probe samples, during a run, what the readers cost the servers: the RSS
// of the server (and of an auxiliary process, Centrifugo's publisher), the
// VStreams vtgate serves and the binlog dump threads on each primary.
type probe struct {
	server, aux int // pids; 0 when unknown
	vt          vtctld
	varsURL     string
	log         *slog.Logger

	mu            sync.Mutex
	rssPeak       map[int]int64
	vstreamPeak   int64
	dumpPeak      map[string]int
	dumpPeakSum   int
	vstreamerPeak int64
	tablets       []tablet
	errs          map[string]bool
}

func (p *probe) note(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.errs == nil {
		p.errs = map[string]bool{}
	}
	if !p.errs[err.Error()] {
		p.errs[err.Error()] = true
		p.log.Warn("probe", "err", err)
	}
}

// sample is one reading of the cluster's stream counts.
type sample struct {
	VStreams    int64          `json:"vtgate_vstreams"`
	DumpThreads map[string]int `json:"binlog_dump_threads"`
	DumpTotal   int            `json:"binlog_dump_threads_total"`
	// Vstreamers is the sum of the primaries' VStreamerCount.
	Vstreamers int64 `json:"vttablet_vstreamers"`
}

// rss reads and records the RSS of the probed processes.
func (p *probe) rss() map[int]int64 {
	out := map[int]int64{}
	for _, pid := range []int{p.server, p.aux} {
		if pid == 0 {
			continue
		}
		if r, err := procRSS(pid); err == nil {
			out[pid] = r
			p.mu.Lock()
			p.rssPeak[pid] = max(p.rssPeak[pid], r)
			p.mu.Unlock()
		}
	}
	return out
}

// streams reads and records vtgate's VStream count and the dump threads.
func (p *probe) streams(ctx context.Context) sample {
	s := sample{DumpThreads: map[string]int{}}
	if n, err := vstreamCount(ctx, p.varsURL); err != nil {
		p.note(err)
	} else {
		s.VStreams = n
	}
	if p.tablets == nil {
		ts, err := p.vt.primaries(ctx)
		if err != nil {
			p.note(err)
		}
		p.tablets = ts
	}
	for _, t := range p.tablets {
		if v, err := vstreamerCount(ctx, t.Web); err != nil {
			p.note(err)
		} else {
			s.Vstreamers += v
		}
		n, err := p.vt.dumpThreads(ctx, t.Alias)
		if err != nil {
			p.note(err)
			p.tablets = nil // the cluster may have been recreated: list again
			continue
		}
		s.DumpThreads[t.Keyspace+"/"+t.Shard] = n
		s.DumpTotal += n
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.vstreamPeak = max(p.vstreamPeak, s.VStreams)
	for k, v := range s.DumpThreads {
		p.dumpPeak[k] = max(p.dumpPeak[k], v)
	}
	p.dumpPeakSum = max(p.dumpPeakSum, s.DumpTotal)
	p.vstreamerPeak = max(p.vstreamerPeak, s.Vstreamers)
	return s
}

// start samples RSS every 200 ms and stream counts every 2 s (each reading
// runs vtctldclient once per primary, ≈ 60 ms of CPU) until stop.
func (p *probe) start(ctx context.Context) (stop func()) {
	p.rssPeak, p.dumpPeak = map[int]int64{}, map[string]int{}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			p.rss()
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	go func() {
		defer wg.Done()
		t := time.NewTicker(2 * time.Second)
		defer t.Stop()
		for {
			p.streams(ctx)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return func() { cancel(); wg.Wait() }
}
