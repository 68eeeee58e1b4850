package main

import (
	"fmt"
	"io"
	"sort"
	"strings"
)

// Report is the result of one run (--json writes it as is).
type Report struct {
	Target   string         `json:"target"`
	Run      string         `json:"run"`
	Mode     string         `json:"mode"` // "load" or "idle"
	Readers  map[string]int `json:"readers"`
	K        int            `json:"k"`
	Rate     float64        `json:"rate"`
	Duration float64        `json:"duration_s"`
	Window   float64        `json:"window_s"` // writer start → drain end

	ReadersReady  int `json:"readers_ready"`  // knew their position before the writer started
	ReadersLate   int `json:"readers_late"`   // knew it only after
	ReadersFailed int `json:"readers_failed"` // never knew it and received nothing

	RowsWritten  int64   `json:"rows_written"`
	WriteErrors  int64   `json:"write_errors"`
	WriterSlipMs float64 `json:"writer_slip_ms"`

	RowsDelivered   int64   `json:"rows_delivered"`
	MsgsDelivered   int64   `json:"msgs_delivered"`
	RowsPerSec      float64 `json:"rows_per_s"`
	RowsPerSecRdr   float64 `json:"rows_per_s_per_reader"`
	MinReaderRows   int64   `json:"min_reader_rows"`
	Expected        int64   `json:"rows_expected"`
	Lost            int64   `json:"lost"`
	Dups            int64   `json:"dups"`
	ReadersWithLoss int     `json:"readers_with_loss"`
	ReadersBehind   int     `json:"readers_behind"` // still short when the drain ended
	Drain           float64 `json:"drain_s"`        // writer end → drain end
	Foreign         int64   `json:"foreign"`
	Malformed       int64   `json:"malformed"`

	Reconnects     int64 `json:"reconnects"`      // planned (storm)
	Disconnects    int64 `json:"disconnects"`     // unplanned, resumed
	ConnectErrors  int64 `json:"connect_errors"`  // refused or failed connection attempts
	RecoveryFailed int64 `json:"recovery_failed"` // Centrifugo: recovered=false

	LatencyP50 float64 `json:"latency_p50_ms"`
	LatencyP99 float64 `json:"latency_p99_ms"`
	LatencyMax float64 `json:"latency_max_ms"`
	// First* is the latency of each row's first receipt by any reader:
	// the writer, the cluster and the server up to its first write. What
	// the readers saw beyond it is the fan-out's share.
	FirstP50 float64 `json:"first_receipt_p50_ms"`
	FirstP99 float64 `json:"first_receipt_p99_ms"`
	FirstMax float64 `json:"first_receipt_max_ms"`
	// Arrival* is the latency at the kernel's receive time (WebSocket
	// readers on Linux): the same rows as Latency*, without the time the
	// tool, which shares the machine's CPUs with the server, took to read
	// them. Latency* minus it is the reading side's share.
	ArrivalP50 float64 `json:"arrival_p50_ms,omitempty"`
	ArrivalP99 float64 `json:"arrival_p99_ms,omitempty"`
	ArrivalMax float64 `json:"arrival_max_ms,omitempty"`
	// Insert* is the writer's INSERT round trip (sent → returned): the
	// part of every latency above spent before the commit is known.
	InsertP50 float64 `json:"insert_p50_ms"`
	InsertP99 float64 `json:"insert_p99_ms"`
	InsertMax float64 `json:"insert_max_ms"`
	// PullRequests is the pull requests the readers made over the window;
	// GatewayPulls those that reached the gateway (its /metrics): fewer
	// behind a cache (--pull-url), or -1 when unknown.
	PullRequests int64   `json:"pull_requests"`
	GatewayPulls float64 `json:"gateway_pull_requests"`

	Server  *ProcReport `json:"server,omitempty"`
	Aux     *ProcReport `json:"aux,omitempty"`
	Cluster float64     `json:"cluster_cpu_s"` // vtgate + vttablet + MariaDB
	LoadCPU float64     `json:"load_cpu_s"`    // this tool

	VStreamsPeak   int64          `json:"vtgate_vstreams_peak"`
	DumpPeak       int            `json:"binlog_dump_threads_peak"`
	DumpPeakBy     map[string]int `json:"binlog_dump_threads_peak_by_shard"`
	VstreamersPeak int64          `json:"vttablet_vstreamers_peak"`
	Before         sample         `json:"before"` // other streams of the cluster, before the readers connect
	End            sample         `json:"end"`    // before the readers disconnect

	Idle   *IdleReport `json:"idle,omitempty"`
	Errors []string    `json:"errors,omitempty"`
}

// ProcReport is the cost of one server process over the window.
type ProcReport struct {
	Pid        int     `json:"pid"`
	RSSPeakMiB float64 `json:"rss_peak_mib"`
	RSSEndMiB  float64 `json:"rss_end_mib"`
	CPUSec     float64 `json:"cpu_s"`
}

// IdleReport is the memory of idle connections.
type IdleReport struct {
	Conns        int     `json:"conns"`
	RSSBeforeMiB float64 `json:"rss_before_mib"`
	RSSAfterMiB  float64 `json:"rss_after_mib"`
	PerConnKiB   float64 `json:"per_conn_kib"`
}

// ok reports whether every row arrived exactly once at every reader.
func (r *Report) ok() bool {
	return r.Lost == 0 && r.Dups == 0 && r.ReadersFailed == 0
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

func (r *Report) text(w io.Writer) {
	var kinds []string
	for k, n := range r.Readers {
		if n > 0 {
			kinds = append(kinds, fmt.Sprintf("%s=%d", k, n))
		}
	}
	sort.Strings(kinds)
	row := func(name, format string, a ...any) {
		fmt.Fprintf(w, "  %-30s "+format+"\n", append([]any{name}, a...)...)
	}
	fmt.Fprintf(w, "vsg-load %s  target=%s run=%s readers: %s\n", r.Mode, r.Target, r.Run, strings.Join(kinds, " "))
	if r.Mode == "load" {
		row("rate / duration / window", "%.0f rows/s  %.1f s  %.1f s", r.Rate, r.Duration, r.Window)
		row("readers ready/late/failed", "%d / %d / %d", r.ReadersReady, r.ReadersLate, r.ReadersFailed)
		row("rows written (errors, slip)", "%d (%d, %.1f ms)", r.RowsWritten, r.WriteErrors, r.WriterSlipMs)
		row("rows delivered", "%d  (%.0f/s total, %.1f/s per reader, min reader %d)", r.RowsDelivered, r.RowsPerSec, r.RowsPerSecRdr, r.MinReaderRows)
		row("messages delivered", "%d", r.MsgsDelivered)
		row("lost / dups (expected)", "%d / %d  (%d; %d readers with loss)", r.Lost, r.Dups, r.Expected, r.ReadersWithLoss)
		row("drain", "%.1f s after the writer; %d readers still short", r.Drain, r.ReadersBehind)
		row("reconnects / disconnects", "%d planned, %d unplanned, %d connect errors, %d recoveries failed", r.Reconnects, r.Disconnects, r.ConnectErrors, r.RecoveryFailed)
		row("latency p50 / p99 / max", "%.1f / %.1f / %.1f ms", r.LatencyP50, r.LatencyP99, r.LatencyMax)
		if r.ArrivalP99 > 0 {
			row("arrival p50 / p99 / max", "%.1f / %.1f / %.1f ms", r.ArrivalP50, r.ArrivalP99, r.ArrivalMax)
		}
		row("first receipt p50 / p99 / max", "%.1f / %.1f / %.1f ms", r.FirstP50, r.FirstP99, r.FirstMax)
		row("INSERT p50 / p99 / max", "%.1f / %.1f / %.1f ms", r.InsertP50, r.InsertP99, r.InsertMax)
		if r.Readers["pull"] > 0 {
			row("pull requests made / at gateway", "%d / %.0f  (%.1f/s reaching the gateway)", r.PullRequests, r.GatewayPulls, r.GatewayPulls/r.Window)
		}
	}
	for _, p := range []struct {
		name string
		p    *ProcReport
	}{{"server", r.Server}, {"publisher", r.Aux}} {
		if p.p != nil {
			row(p.name+" RSS peak / end, CPU", "%.1f / %.1f MiB, %.2f s (pid %d)", p.p.RSSPeakMiB, p.p.RSSEndMiB, p.p.CPUSec, p.p.Pid)
		}
	}
	if r.Idle != nil {
		row("idle connections", "%d: RSS %.1f → %.1f MiB = %.1f KiB per connection", r.Idle.Conns, r.Idle.RSSBeforeMiB, r.Idle.RSSAfterMiB, r.Idle.PerConnKiB)
	}
	row("cluster CPU / load tool CPU", "%.2f s / %.2f s", r.Cluster, r.LoadCPU)
	row("vtgate VStreams before/peak/end", "%d / %d / %d", r.Before.VStreams, r.VStreamsPeak, r.End.VStreams)
	row("vttablet vstreamers b/p/e", "%d / %d / %d", r.Before.Vstreamers, r.VstreamersPeak, r.End.Vstreamers)
	row("dump threads before/peak/end", "%d / %d / %d  %v", r.Before.DumpTotal, r.DumpPeak, r.End.DumpTotal, r.End.DumpThreads)
	for _, e := range r.Errors {
		row("error", "%s", e)
	}
}
