package main

import (
	"fmt"
	"io"
	"math"
	"strings"
)

// report is the part of vsg-load's JSON report the table shows.
type report struct {
	K             int     `json:"k"`
	Window        float64 `json:"window_s"`
	RowsWritten   int64   `json:"rows_written"`
	RowsPerSec    float64 `json:"rows_per_s"`
	RowsPerSecRdr float64 `json:"rows_per_s_per_reader"`
	ReadersFailed int     `json:"readers_failed"`
	Lost          int64   `json:"lost"`
	Dups          int64   `json:"dups"`
	P50           float64 `json:"latency_p50_ms"`
	P99           float64 `json:"latency_p99_ms"`
	Max           float64 `json:"latency_max_ms"`
	FirstP99      float64 `json:"first_receipt_p99_ms"`
	ArrivalP99    float64 `json:"arrival_p99_ms"`
	InsertP99     float64 `json:"insert_p99_ms"`
	Server        *proc   `json:"server"`
	Aux           *proc   `json:"aux"`
	Cluster       float64 `json:"cluster_cpu_s"`
	LoadCPU       float64 `json:"load_cpu_s"`
	VStreamsPeak  int64   `json:"vtgate_vstreams_peak"`
	DumpPeak      int     `json:"binlog_dump_threads_peak"`
	VstreamerPeak int64   `json:"vttablet_vstreamers_peak"`
	Idle          *struct {
		Conns        int     `json:"conns"`
		RSSBeforeMiB float64 `json:"rss_before_mib"`
		RSSAfterMiB  float64 `json:"rss_after_mib"`
		PerConnKiB   float64 `json:"per_conn_kib"`
	} `json:"idle"`
	Before struct {
		VStreams   int64 `json:"vtgate_vstreams"`
		DumpTotal  int   `json:"binlog_dump_threads_total"`
		Vstreamers int64 `json:"vttablet_vstreamers"`
	} `json:"before"`
}

type proc struct {
	RSSPeakMiB float64 `json:"rss_peak_mib"`
	CPUSec     float64 `json:"cpu_s"`
}

// rss and cpu are a side's server plus, for Centrifugo, its publisher:
// both are what a team runs to serve the readers.
func (r *report) rss() float64 {
	v := 0.0
	for _, p := range []*proc{r.Server, r.Aux} {
		if p != nil {
			v += p.RSSPeakMiB
		}
	}
	return v
}

func (r *report) cpu() float64 {
	v := 0.0
	for _, p := range []*proc{r.Server, r.Aux} {
		if p != nil {
			v += p.CPUSec
		}
	}
	return v
}

func table(w io.Writer, c config, reports map[string]map[int]*report) {
	fmt.Fprintf(w, "\nbench-fanout: %.0f rows/s for %v, K WebSocket readers; gateway (one shared tail per stream) vs Centrifugo + one VStream publisher\n", c.rate, c.duration)
	fmt.Fprintln(w, "RSS and CPU: the server process, plus the publisher for Centrifugo; cluster CPU: vtgate + vttablet + MariaDB")
	fmt.Fprintln(w, "VStreams: vtgate's VStreamsCount (one per shard streamed); before the run: other users of the shared cluster, and for Centrifugo its publisher")
	for _, k := range c.ks {
		g, f := reports["gateway"][k], reports["centrifugo"][k]
		if g == nil || f == nil {
			continue
		}
		fmt.Fprintf(w, "\nK=%d\n%-30s %14s %14s %10s\n", k, "", "gateway", "centrifugo", "gw/cf")
		line := func(name string, a, b float64, format string) {
			fmt.Fprintf(w, "%-30s %14s %14s %10s\n", name, fmt.Sprintf(format, a), fmt.Sprintf(format, b), ratio(a, b))
		}
		line("rows written", float64(g.RowsWritten), float64(f.RowsWritten), "%.0f")
		line("delivered rows/s (total)", g.RowsPerSec, f.RowsPerSec, "%.0f")
		line("delivered rows/s per reader", g.RowsPerSecRdr, f.RowsPerSecRdr, "%.1f")
		line("lost", float64(g.Lost), float64(f.Lost), "%.0f")
		line("dups", float64(g.Dups), float64(f.Dups), "%.0f")
		line("readers failed", float64(g.ReadersFailed), float64(f.ReadersFailed), "%.0f")
		line("latency p50 ms", g.P50, f.P50, "%.1f")
		line("latency p99 ms", g.P99, f.P99, "%.1f")
		line("latency max ms", g.Max, f.Max, "%.1f")
		line("  arrival p99 ms", g.ArrivalP99, f.ArrivalP99, "%.1f")
		line("  first receipt p99 ms", g.FirstP99, f.FirstP99, "%.1f")
		line("  INSERT p99 ms", g.InsertP99, f.InsertP99, "%.1f")
		line("RSS peak MiB", g.rss(), f.rss(), "%.1f")
		line("CPU s", g.cpu(), f.cpu(), "%.2f")
		line("cluster CPU s", g.Cluster, f.Cluster, "%.2f")
		line("load tool CPU s", g.LoadCPU, f.LoadCPU, "%.2f")
		line("vtgate VStreams peak", float64(g.VStreamsPeak), float64(f.VStreamsPeak), "%.0f")
		line("  before the run", float64(g.Before.VStreams), float64(f.Before.VStreams), "%.0f")
		line("vttablet vstreamers peak", float64(g.VstreamerPeak), float64(f.VstreamerPeak), "%.0f")
		line("  before the run", float64(g.Before.Vstreamers), float64(f.Before.Vstreamers), "%.0f")
		line("binlog dump threads peak", float64(g.DumpPeak), float64(f.DumpPeak), "%.0f")
		line("  before the run", float64(g.Before.DumpTotal), float64(f.Before.DumpTotal), "%.0f")
	}
	fmt.Fprintln(w, strings.Repeat("-", 72))
}

// idleTable shows the idle-memory runs: the server's RSS (without
// Centrifugo's publisher, which does not grow with connections).
func idleTable(w io.Writer, c config, reports map[string]map[int]*report) {
	if len(c.idleKs) == 0 {
		return
	}
	fmt.Fprintln(w, "\nidle connections (nothing written): server RSS before and after, per connection")
	for _, k := range c.idleKs {
		g, f := reports["gateway"][k], reports["centrifugo"][k]
		if g == nil || f == nil || g.Idle == nil || f.Idle == nil {
			continue
		}
		fmt.Fprintf(w, "\nK=%d idle\n%-30s %14s %14s %10s\n", k, "", "gateway", "centrifugo", "gw/cf")
		line := func(name string, a, b float64, format string) {
			fmt.Fprintf(w, "%-30s %14s %14s %10s\n", name, fmt.Sprintf(format, a), fmt.Sprintf(format, b), ratio(a, b))
		}
		line("connections", float64(g.Idle.Conns), float64(f.Idle.Conns), "%.0f")
		line("RSS before MiB", g.Idle.RSSBeforeMiB, f.Idle.RSSBeforeMiB, "%.1f")
		line("RSS after MiB", g.Idle.RSSAfterMiB, f.Idle.RSSAfterMiB, "%.1f")
		line("KiB per connection", g.Idle.PerConnKiB, f.Idle.PerConnKiB, "%.1f")
	}
	fmt.Fprintln(w, strings.Repeat("-", 72))
}

func ratio(a, b float64) string {
	if b == 0 {
		if a == 0 {
			return "="
		}
		return "∞"
	}
	r := a / b
	if math.IsNaN(r) {
		return "-"
	}
	return fmt.Sprintf("%.2f", r)
}
