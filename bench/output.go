package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/depot-dev/depot/actors/client"
)

// BaselineRow is one baseline measurement as a JSON object of -o json. The
// paced write's row also gives the latency of its writes.
type BaselineRow struct {
	Workload string  `json:"workload"`
	Bytes    int64   `json:"bytes"`
	Seconds  float64 `json:"seconds"`
	MBPerS   float64 `json:"mb_per_s"`
	P50Ms    float64 `json:"p50_ms,omitempty"`
	P99Ms    float64 `json:"p99_ms,omitempty"`
	MaxMs    float64 `json:"max_ms,omitempty"`
}

// Baseline rows, by their workload field.
const (
	RowFileWrite      = "baseline-file-write"
	RowFileWriteFsync = "baseline-file-write-fsync"
	RowFileRead       = "baseline-file-read"
	RowGroupCommit    = "baseline-file-group-commit"
	RowPacedWrite     = "baseline-file-write-paced"
	RowLoopback       = "baseline-loopback-tcp"
)

// Rows returns the baseline as rows.
func (b *Baseline) Rows() []BaselineRow {
	return []BaselineRow{
		{Workload: RowFileWrite, Bytes: b.FileBytes, Seconds: b.FileWriteSeconds, MBPerS: b.FileWriteMBPerS},
		{Workload: RowFileWriteFsync, Bytes: b.FileBytes, Seconds: b.FileFsyncSeconds, MBPerS: b.FileFsyncMBPerS},
		{Workload: RowFileRead, Bytes: b.FileBytes, Seconds: b.FileReadSeconds, MBPerS: b.FileReadMBPerS},
		{Workload: RowGroupCommit, Bytes: b.GroupCommitBytes, Seconds: b.GroupCommitSeconds, MBPerS: b.GroupCommitMBPerS},
		{
			Workload: RowPacedWrite, Bytes: b.PacedWriteBytes, Seconds: b.PacedWriteSeconds, MBPerS: b.PacedWriteMBPerS,
			P50Ms: b.PacedWriteP50Ms, P99Ms: b.PacedWriteP99Ms, MaxMs: b.PacedWriteMaxMs,
		},
		{Workload: RowLoopback, Bytes: b.LoopbackBytes, Seconds: b.LoopbackSeconds, MBPerS: b.LoopbackMBPerS},
	}
}

// WriteJSON writes one JSON object per line: the baseline rows, then one
// per workload row.
func (rep *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	if rep.Baseline != nil {
		for _, row := range rep.Baseline.Rows() {
			if err := enc.Encode(row); err != nil {
				return err
			}
		}
	}
	for _, res := range rep.Results {
		if err := enc.Encode(res); err != nil {
			return err
		}
	}
	return nil
}

// ratioFootnote says what the ratio columns divide by: each row's MB/s by
// a baseline row's, named with its figure and the rows that use it.
func ratioFootnote(b *Baseline, results []Result) string {
	var order []string
	users := map[string][]string{}
	for _, r := range results {
		if r.RatioToBaseline == nil {
			continue
		}
		if _, ok := users[r.BaselineRow]; !ok {
			order = append(order, r.BaselineRow)
		}
		name := r.Workload
		if r.Workload == RowProduce {
			name += ", acks=" + client.FormatAcks(r.Acks)
		}
		users[r.BaselineRow] = append(users[r.BaselineRow], name)
	}
	if len(order) == 0 {
		return ""
	}
	var parts []string
	for _, row := range order {
		parts = append(parts, fmt.Sprintf("%s's %.1f MB/s (%s)", row, b.mbPerSOf(row), strings.Join(users[row], ", ")))
	}
	return fmt.Sprintf("x disk: the row's MB/s over %s\nx loopback: the row's MB/s over %s's %.1f MB/s\n",
		strings.Join(parts, ", over "), RowLoopback, b.LoopbackMBPerS)
}

// WriteText writes the report as a table with a heading, a note on the
// ratio columns when there are any, and a memory line.
func (rep *Report) WriteText(w io.Writer) error {
	cfg := rep.Config
	target := "embedded node"
	if len(cfg.Brokers) > 0 {
		target = fmt.Sprintf("brokers %v", cfg.Brokers)
	}
	rate := "unthrottled"
	if cfg.Rate > 0 {
		rate = fmt.Sprintf("%.0f records/s", cfg.Rate)
	}
	bound := fmt.Sprintf("for %s (no record bound)", cfg.Duration)
	if cfg.countBound() {
		bound = fmt.Sprintf("%d records or %s, whichever first", cfg.Records, cfg.Duration)
	}
	fmt.Fprintf(w, "depot bench: %s, topic %s, %d B records, %d partition(s), %d producer(s), %d consumer(s), acks=%s, compression %s, keys %d, %s, %s\n",
		target, cfg.Topic, cfg.RecordSize, cfg.Partitions, cfg.Producers, cfg.Consumers, client.FormatAcks(cfg.Acks), cfg.Compression, cfg.Keys, rate, bound)
	if cfg.Warmup > 0 {
		var warm int64
		for _, r := range rep.Results {
			warm += r.WarmupRecords
		}
		fmt.Fprintf(w, "warm-up: the first %v of production (%d records) is left out of the produce and end-to-end rows\n", cfg.Warmup, warm)
	}
	if rep.Interrupted {
		fmt.Fprintln(w, "interrupted: figures cover what ran")
	}
	if b := rep.Baseline; b != nil {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "baseline\tbytes\tseconds\tMB/s\twrite p50 ms\tp99 ms\tmax ms\t")
		for _, row := range b.Rows() {
			fmt.Fprintf(tw, "%s\t%d\t%.2f\t%.1f\t", row.Workload, row.Bytes, row.Seconds, row.MBPerS)
			if row.Workload == RowPacedWrite {
				fmt.Fprintf(tw, "%.3f\t%.3f\t%.3f\t", row.P50Ms, row.P99Ms, row.MaxMs)
			}
			fmt.Fprintln(tw)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintln(w)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := "workload\trecords\tseconds\trecords/s\tMB/s\tlatency\tp50 ms\tp99 ms\tp99.9 ms\tmax ms\terrors\tcores\t"
	if rep.Baseline != nil {
		head += "x disk\tx loopback\t"
	}
	fmt.Fprintln(tw, head)
	for _, r := range rep.Results {
		cores := "-"
		if r.CPUCores > 0 {
			cores = fmt.Sprintf("%.2f", r.CPUCores)
		}
		fmt.Fprintf(tw, "%s\t%d\t%.2f\t%.0f\t%.1f\t%s\t%.3f\t%.3f\t%.3f\t%.3f\t%d\t%s\t",
			r.Workload, r.Records, r.Seconds, r.RecordsPerS, r.MBPerS, r.Latency, r.P50Ms, r.P99Ms, r.P999Ms, r.MaxMs, r.Errors, cores)
		if r.RatioToBaseline != nil && r.RatioToLoopback != nil {
			fmt.Fprintf(tw, "%.3f\t%.3f\t", *r.RatioToBaseline, *r.RatioToLoopback)
		}
		fmt.Fprintln(tw)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if rep.Baseline != nil {
		fmt.Fprint(w, ratioFootnote(rep.Baseline, rep.Results))
	}
	var bufferBound int64
	for _, r := range rep.Results {
		bufferBound = max(bufferBound, r.BufferBoundBytes)
		if line := batchesLine(r); line != "" {
			fmt.Fprintln(w, line)
		}
	}
	_, err := fmt.Fprintf(w, "memory: peak RSS %.1f MB; producer buffer peak %.1f MB of %.1f MB bound\n",
		float64(rep.PeakRSSBytes)/1e6, float64(rep.PeakBufferedBytes)/1e6, float64(bufferBound)/1e6)
	if err == nil && rep.DataDir != "" {
		_, err = fmt.Fprintf(w, "data kept in %s\n", rep.DataDir)
	}
	return err
}

// batchesLine describes the batches of a produce row: how many records
// each held, how many went in a request, and the process's CPU per batch
// (with an embedded node's, when there is one); "" for other rows.
func batchesLine(r Result) string {
	if r.Batches <= 0 || r.Requests <= 0 {
		return ""
	}
	line := fmt.Sprintf("batches: %d in %d requests, %.1f records a batch, %.1f batches a request",
		r.Batches, r.Requests, float64(r.Records)/float64(r.Batches), float64(r.Batches)/float64(r.Requests))
	if r.CPUCores > 0 {
		line += fmt.Sprintf("; CPU %.1f us a batch", r.CPUCores*r.Seconds*1e6/float64(r.Batches))
	}
	return line
}
