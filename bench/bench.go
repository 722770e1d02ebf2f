// Package bench is Depot's benchmark driver: `depot bench` produces and
// consumes records against running nodes (named by --brokers or
// DEPOT_BROKERS) or a node embedded in the process (with neither, or with
// --embedded), and reports throughput and latency in the manner of
// kafka-producer-perf-test and the OpenMessaging Benchmark.
//
// # Workloads
//
//   - produce: producers send --records records or run for --duration,
//     whichever ends first (with --duration alone, for that long); the row
//     reports acknowledged records per second
//     and the acknowledgement latency (Produce call to promise).
//   - both (the default): as produce, with consumers tailing the topic from
//     the first offset of the run while the producers run (OpenMessaging's
//     model). Besides the produce row, an end-to-end row reports the tailing
//     consumers' rate and the end-to-end latency (Produce call to the record
//     returned by Poll). Then, as with consume, a catch-up read.
//   - consume: as produce, then consumers re-read every record of the run
//     from its first offset (catch-up read); the consume row reports that
//     read rate and the time each Poll waited for records.
//
// # Record layout
//
// Every value is --record-size bytes (at least 8) of random bytes generated
// once, except its first 8 bytes, which carry the send time:
//
//	offset 0  int64 little-endian  time.Now().UnixNano() at the Produce call
//	offset 8  random payload, record-size - 8 bytes
//
// so that end-to-end latency is measured at nanosecond resolution rather
// than from the record's millisecond timestamp. Keys, with --keys K, are
// "key-0" .. "key-(K-1)" in turn; with K = 0 they are null.
//
// # Figures
//
// MB is 10^6 bytes of value payload (keys and framing not counted).
// Latencies are recorded in HDR histograms (1 us .. 60 s, 3 significant
// digits) and reported in milliseconds. With --baseline the same run first
// measures the machine (sequential file write with and without one fsync,
// read back, the same write under a group commit, loopback TCP) and every
// Depot figure is also given as a ratio to the matching limit.
//
// Everything listens on 127.0.0.1, every phase is bounded in count and
// time, and a cancelled context (Ctrl-C) ends the run early with what was
// measured so far.
package bench

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/depot-dev/depot/wire"
)

// Errors returned by Run.
var (
	// ErrConfig means the configuration cannot be run.
	ErrConfig = errors.New("bench: invalid config")
)

// Workload says what a run measures.
type Workload string

// Workloads.
const (
	// WorkloadProduce produces only.
	WorkloadProduce Workload = "produce"
	// WorkloadConsume produces, then re-reads everything from the start.
	WorkloadConsume Workload = "consume"
	// WorkloadBoth produces with tailing consumers, then re-reads
	// everything from the start.
	WorkloadBoth Workload = "both"
)

// Result rows, by their workload field.
const (
	RowProduce   = "produce"
	RowEndToEnd  = "end-to-end"
	RowConsume   = "consume"
	latencyAck   = "ack"
	latencyE2E   = "end-to-end"
	latencyPoll  = "poll-wait"
	valueTimePos = 0 // where the send time sits in each value
	valueTimeLen = 8
)

// Defaults of Config.
const (
	DefaultRecordSize       = 1024
	DefaultRecords          = 1_000_000
	DefaultDuration         = 60 * time.Second
	DefaultBaselineDuration = 2 * time.Second
	// DefaultDrainTimeout bounds how long tailing consumers may take to
	// catch up once the producers are done.
	DefaultDrainTimeout = 30 * time.Second
)

// Config is one benchmark run. The zero value, with defaults applied, is
// the default `depot bench`: 1,000,000 records of 1 KiB (at most 60 s) to
// one partition of an embedded node, one producer with acks=1, one consumer.
type Config struct {
	// Brokers are the nodes to benchmark; empty starts an embedded node.
	Brokers []string
	// Topic is the topic produced to. Default depot-bench-<random hex>.
	// Created with Partitions partitions when it does not exist.
	Topic string
	// Keep keeps the topic (against Brokers) or the embedded node's data
	// directory at the end. Default false: both are removed.
	Keep bool
	// Dir is where the embedded node's data directory and the baseline's
	// file go. Default os.TempDir().
	Dir string

	// RecordSize is each value's size in bytes, at least 8. Default 1024.
	RecordSize int
	// Records is the number of records produced across producers. Default
	// 1,000,000 when Duration is not set either; with Duration set and
	// Records zero, production has no count bound and ends by time. So a
	// run is always bounded in time, and in count unless Duration is set.
	Records int64
	// Duration bounds production (and separately the catch-up read).
	// Default 60 s.
	Duration time.Duration
	// Partitions of the topic. Default 1.
	Partitions int
	// ReplicationFactor of a topic the run creates: replicas of each
	// partition. 0 takes the cluster's default (1).
	ReplicationFactor int
	// Producers, each with its own client producer. Default 1.
	Producers int
	// Consumers, each assigned partitions p with p % Consumers == its
	// index. Default 1.
	Consumers int
	// Acks is 0, 1 or -1 (all). Default 1 (the flag's default; set
	// AcksSet to run with 0).
	Acks    int
	AcksSet bool
	// Compression of produced batches. Default none.
	Compression wire.Compression
	// Keys is the number of distinct keys; 0 means null keys. Default 0.
	Keys int
	// Rate is the target records per second across producers; 0 means
	// unthrottled. Each producer paces itself with a token bucket.
	Rate float64
	// Warmup is the first part of production whose records are sent and
	// acknowledged but left out of the produce and end-to-end figures
	// (count, rate, latencies), as OpenMessaging Benchmark's warm-up: they
	// measure start-up (connections, buffers, the collector sizing its
	// heap) rather than the steady state. Default 0: everything counts.
	Warmup time.Duration
	// Linger and BatchBytes pass to the producers; zero keeps the client's
	// defaults (5 ms, 1 MiB).
	Linger     time.Duration
	BatchBytes int
	// MaxBufferedBytes bounds each producer's unacknowledged bytes.
	// Default 0: the client's default, which grows with the partitions
	// written to (see client.MaxBufferedBytes).
	MaxBufferedBytes int64
	// DrainTimeout bounds the tailing consumers' catch-up after
	// production. Default 30 s.
	DrainTimeout time.Duration
	// Workload is produce, consume or both. Default both.
	Workload Workload

	// Baseline measures the machine first and adds ratios to every row.
	Baseline bool
	// BaselineDuration bounds the loopback TCP measurement. Default 2 s;
	// each file measurement is bounded by 5 times it.
	BaselineDuration time.Duration

	// Progress, when set, receives a progress bar (a terminal). Default
	// none.
	Progress io.Writer
	// Logger receives the node's and client's logs. Default: warnings and
	// errors on stderr.
	Logger *logrus.Logger
}

// withDefaults returns c with every unset field defaulted, or an error
// wrapping ErrConfig.
func (c Config) withDefaults() (Config, error) {
	if c.RecordSize == 0 {
		c.RecordSize = DefaultRecordSize
	}
	if c.Records == 0 && c.Duration == 0 {
		c.Records = DefaultRecords
	}
	if c.Duration == 0 {
		c.Duration = DefaultDuration
	}
	if c.Partitions == 0 {
		c.Partitions = 1
	}
	if c.Producers == 0 {
		c.Producers = 1
	}
	if c.Consumers == 0 {
		c.Consumers = 1
	}
	if c.Acks == 0 && !c.AcksSet {
		c.Acks = 1
	}
	if c.DrainTimeout == 0 {
		c.DrainTimeout = DefaultDrainTimeout
	}
	if c.Workload == "" {
		c.Workload = WorkloadBoth
	}
	if c.BaselineDuration == 0 {
		c.BaselineDuration = DefaultBaselineDuration
	}
	if c.Dir == "" {
		c.Dir = os.TempDir()
	}
	if c.Topic == "" {
		var b [4]byte
		_, _ = rand.Read(b[:])
		c.Topic = "depot-bench-" + hex.EncodeToString(b[:])
	}
	if c.Logger == nil {
		c.Logger = logrus.New()
		c.Logger.SetLevel(logrus.WarnLevel)
	}
	var errs []error
	if c.RecordSize < valueTimeLen {
		errs = append(errs, fmt.Errorf("record size %d: at least %d bytes (the send time)", c.RecordSize, valueTimeLen))
	}
	if c.Records < 0 || c.Duration < 0 || c.Partitions < 0 || c.ReplicationFactor < 0 || c.Producers < 0 || c.Consumers < 0 ||
		c.Keys < 0 || c.Rate < 0 || c.Linger < 0 || c.BatchBytes < 0 || c.MaxBufferedBytes < 0 ||
		c.DrainTimeout < 0 || c.BaselineDuration < 0 || c.Warmup < 0 {
		errs = append(errs, errors.New("counts, sizes, rates and durations must not be negative"))
	}
	if c.Acks != 0 && c.Acks != 1 && c.Acks != -1 {
		errs = append(errs, fmt.Errorf("acks %d: want 0, 1 or -1 (all)", c.Acks))
	}
	if c.Compression < wire.CompressionNone || c.Compression > wire.CompressionZstd {
		errs = append(errs, fmt.Errorf("compression %d unknown", c.Compression))
	}
	switch c.Workload {
	case WorkloadProduce, WorkloadConsume, WorkloadBoth:
	default:
		errs = append(errs, fmt.Errorf("workload %q: want produce, consume or both", c.Workload))
	}
	if len(errs) > 0 {
		return c, fmt.Errorf("%w: %w", ErrConfig, errors.Join(errs...))
	}
	return c, nil
}

// countBound reports whether production ends at Records (or earlier, at
// Duration); without it production ends by time. For a config with
// defaults applied.
func (c Config) countBound() bool { return c.Records > 0 }

// Result is one row of a report: a workload's figures.
type Result struct {
	Workload string `json:"workload"`
	// Latency names what the percentiles measure: ack (Produce call to
	// promise), end-to-end (Produce call to Poll), poll-wait (time a Poll
	// waited for records).
	Latency     string  `json:"latency"`
	RecordSize  int     `json:"record_size"`
	Records     int64   `json:"records"`
	Seconds     float64 `json:"seconds"`
	RecordsPerS float64 `json:"records_per_s"`
	MBPerS      float64 `json:"mb_per_s"`
	P50Ms       float64 `json:"p50_ms"`
	P99Ms       float64 `json:"p99_ms"`
	P999Ms      float64 `json:"p999_ms"`
	MaxMs       float64 `json:"max_ms"`
	Partitions  int     `json:"partitions"`
	Replicas    int     `json:"replication_factor,omitempty"`
	Producers   int     `json:"producers"`
	Consumers   int     `json:"consumers"`
	Acks        int     `json:"acks"`
	Compression string  `json:"compression"`
	Keys        int     `json:"keys"`
	Rate        float64 `json:"rate"`
	Errors      int64   `json:"errors"`
	// PeakRSSBytes is the process's peak resident set (VmHWM) at the end.
	PeakRSSBytes int64 `json:"peak_rss_bytes"`
	// CPUCores is the CPU time, user and system, the process used while
	// the row was measured over the wall time: how many cores the client
	// kept busy, with the embedded node's included when there is one.
	// Produce and consume rows only; left out where it cannot be read.
	CPUCores float64 `json:"cpu_cores,omitempty"`
	// PeakBufferedBytes is the largest BufferedBytes() seen of any one
	// producer (sampled every 10 ms), against BufferBoundBytes; produce
	// row only.
	PeakBufferedBytes int64 `json:"peak_buffered_bytes,omitempty"`
	BufferBoundBytes  int64 `json:"buffer_bound_bytes,omitempty"`
	// Requests and Batches are the ProduceRequests the producers sent
	// while the produce row was measured, and the batches they carried
	// (resends included); produce row only. With many partitions a
	// batch holds few records, and what a record costs is mostly what its
	// batch costs.
	Requests int64 `json:"requests,omitempty"`
	Batches  int64 `json:"batches,omitempty"`
	// WarmupRecords is how many records, produce row only, were produced
	// during the warm-up and left out of it (see Config.Warmup).
	WarmupRecords int64 `json:"warmup_records,omitempty"`
	// RatioToBaseline is MB/s over the MB/s of the baseline row named by
	// BaselineRow: the file write for produce (the group commit for
	// acks=all), the file read for the others. With Baseline only.
	RatioToBaseline *float64 `json:"ratio_to_baseline,omitempty"`
	BaselineRow     string   `json:"baseline_row,omitempty"`
	// RatioToLoopback is MB/s over loopback TCP MB/s; with Baseline only.
	RatioToLoopback *float64 `json:"ratio_to_loopback,omitempty"`
	Interrupted     bool     `json:"interrupted,omitempty"`
}

// Report is what a run measured.
type Report struct {
	Config   Config
	Results  []Result
	Baseline *Baseline
	// Series is the cumulative record counts sampled every 100 ms.
	Series []Sample
	// Ack and EndToEnd are the latency distributions, for plotting.
	Ack, EndToEnd *Latencies
	// PeakRSSBytes, PeakBufferedBytes: see Result.
	PeakRSSBytes      int64
	PeakBufferedBytes int64
	// DataDir is the embedded node's data directory when Keep kept it.
	DataDir     string
	Interrupted bool
}

// Sample is the cumulative counts at a moment of the run.
type Sample struct {
	// At is the time since the run started.
	At       time.Duration
	Produced int64
	Tailed   int64
	Consumed int64
}
