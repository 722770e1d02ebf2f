package bench

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/depot-dev/depot/actors/client"
)

// Baseline sizes.
const (
	baselineBlock    = 1 << 20  // file writes and reads
	loopbackBlock    = 64 << 10 // loopback TCP writes
	maxBaselineBytes = 1 << 30
	minBaselineBytes = 1 << 20
	// pacedBlock and pacedInterval make the paced write: 128 KiB every
	// millisecond, 131 MB/s, well within what a disk takes.
	pacedBlock    = 128 << 10
	pacedInterval = time.Millisecond
)

// Baseline is what this machine does without Depot in the way: one
// sequential file written in 1 MiB writes (timed without and with one fsync
// at the end), read back in 1 MiB reads (mostly from the page cache); a
// second file written the same way under a group commit (see
// measureGroupCommit); a third written at a moderate pace, each write
// timed (see measurePacedWrite); and one loopback TCP connection with
// 64 KiB writes.
type Baseline struct {
	FileBytes        int64   `json:"file_bytes"`
	FileWriteMBPerS  float64 `json:"file_write_mb_per_s"`
	FileFsyncMBPerS  float64 `json:"file_write_fsync_mb_per_s"`
	FileReadMBPerS   float64 `json:"file_read_mb_per_s"`
	LoopbackBytes    int64   `json:"loopback_bytes"`
	LoopbackMBPerS   float64 `json:"loopback_mb_per_s"`
	FileWriteSeconds float64 `json:"file_write_seconds"`
	FileFsyncSeconds float64 `json:"file_write_fsync_seconds"`
	FileReadSeconds  float64 `json:"file_read_seconds"`
	LoopbackSeconds  float64 `json:"loopback_seconds"`
	FileTimeBoundHit bool    `json:"file_time_bound_hit,omitempty"`

	GroupCommitBytes   int64   `json:"group_commit_bytes"`
	GroupCommitWindow  int64   `json:"group_commit_window_bytes"`
	GroupCommitFsyncs  int     `json:"group_commit_fsyncs"`
	GroupCommitMBPerS  float64 `json:"group_commit_mb_per_s"`
	GroupCommitSeconds float64 `json:"group_commit_seconds"`

	PacedWriteBytes   int64   `json:"paced_write_bytes"`
	PacedWriteSeconds float64 `json:"paced_write_seconds"`
	PacedWriteMBPerS  float64 `json:"paced_write_mb_per_s"`
	PacedWriteP50Ms   float64 `json:"paced_write_p50_ms"`
	PacedWriteP99Ms   float64 `json:"paced_write_p99_ms"`
	PacedWriteMaxMs   float64 `json:"paced_write_max_ms"`
}

// baselineBytes is the file size of the baseline: what the run produces,
// between 1 MiB and 1 GiB (1 GiB for a run bounded by time only).
func baselineBytes(cfg Config) int64 {
	if !cfg.countBound() {
		return maxBaselineBytes
	}
	n := cfg.Records * int64(cfg.RecordSize)
	return min(max(n, minBaselineBytes), maxBaselineBytes)
}

// groupCommitWindow is how far the group commit pass writes ahead of its
// last fsync: the bytes an acks=all producer has in flight by default,
// ten requests of its batch size.
func groupCommitWindow(cfg Config) int64 {
	batch := cfg.BatchBytes
	if batch == 0 {
		batch = client.DefaultBatchBytes
	}
	return int64(client.DefaultMaxInFlightAcksAll) * int64(batch)
}

// MeasureBaseline measures the machine: files of size bytes in dir (removed
// afterwards), the group commit writing at most window bytes ahead of its
// fsyncs, each file pass bounded by 5 x loopback, a paced write for
// loopback, and loopback TCP on 127.0.0.1 for loopback.
func MeasureBaseline(ctx context.Context, dir string, size, window int64, loopback time.Duration) (*Baseline, error) {
	b := &Baseline{}
	if err := withBaselineFile(dir, func(f *os.File, block []byte) error {
		return b.measureFile(ctx, f, block, size, 5*loopback)
	}); err != nil {
		return nil, err
	}
	if err := withBaselineFile(dir, func(f *os.File, block []byte) error {
		return b.measureGroupCommit(ctx, f, block, size, window, 5*loopback)
	}); err != nil {
		return nil, err
	}
	if err := withBaselineFile(dir, func(f *os.File, block []byte) error {
		return b.measurePacedWrite(ctx, f, block[:pacedBlock], loopback)
	}); err != nil {
		return nil, err
	}
	if err := b.measureLoopback(ctx, loopback); err != nil {
		return nil, err
	}
	return b, nil
}

// withBaselineFile creates a temporary file in dir, runs measure on it with
// a block of random bytes to write, and removes it.
func withBaselineFile(dir string, measure func(f *os.File, block []byte) error) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("bench: baseline: %w", err)
	}
	f, err := os.CreateTemp(dir, "depot-bench-baseline-")
	if err != nil {
		return fmt.Errorf("bench: baseline: %w", err)
	}
	block := make([]byte, baselineBlock)
	_, _ = rand.Read(block)
	err = measure(f, block)
	f.Close()
	if rerr := os.Remove(f.Name()); rerr != nil && err == nil {
		err = fmt.Errorf("bench: baseline: %w", rerr)
	}
	return err
}

// measureFile writes size bytes to f, then reads them back, each pass
// bounded by bound.
func (b *Baseline) measureFile(ctx context.Context, f *os.File, block []byte, size int64, bound time.Duration) error {
	start := time.Now()
	var written int64
	for written < size && ctx.Err() == nil {
		if time.Since(start) > bound {
			b.FileTimeBoundHit = true
			break
		}
		n, err := f.Write(block[:min(int64(len(block)), size-written)])
		written += int64(n)
		if err != nil {
			return fmt.Errorf("bench: baseline write: %w", err)
		}
	}
	wrote := time.Since(start)
	if err := f.Sync(); err != nil {
		return fmt.Errorf("bench: baseline fsync: %w", err)
	}
	synced := time.Since(start)
	b.FileBytes = written
	b.FileWriteSeconds, b.FileFsyncSeconds = wrote.Seconds(), synced.Seconds()
	b.FileWriteMBPerS = mbPerS(written, wrote)
	b.FileFsyncMBPerS = mbPerS(written, synced)

	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("bench: baseline: %w", err)
	}
	start = time.Now()
	var read int64
	for ctx.Err() == nil && time.Since(start) < bound {
		n, err := f.Read(block)
		read += int64(n)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("bench: baseline read: %w", err)
		}
	}
	took := time.Since(start)
	b.FileReadSeconds = took.Seconds()
	b.FileReadMBPerS = mbPerS(read, took)
	return nil
}

// measureGroupCommit writes size bytes to f in 1 MiB writes while another
// goroutine fsyncs the file over and over, each fsync covering what was
// written before it began, as a partition's group commit does for acks=all.
// The writer stays at most window bytes ahead of the last fsync that ended,
// as a producer with that many bytes in flight waits for its answers. The
// time runs until everything written is synced.
func (b *Baseline) measureGroupCommit(ctx context.Context, f *os.File, block []byte, size, window int64, bound time.Duration) error {
	var (
		mu              sync.Mutex
		cond            = sync.NewCond(&mu)
		written, synced int64
		fsyncs          int
		done            bool
		syncErr         error
	)
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		mu.Lock()
		defer mu.Unlock()
		for {
			for written == synced && !done {
				cond.Wait()
			}
			if written == synced {
				return
			}
			upTo := written
			mu.Unlock()
			err := f.Sync()
			mu.Lock()
			fsyncs++
			if err != nil {
				syncErr = err
				cond.Broadcast()
				return
			}
			synced = upTo
			cond.Broadcast()
		}
	}()
	start := time.Now()
	var werr error
	mu.Lock()
	for written < size && syncErr == nil && ctx.Err() == nil && time.Since(start) <= bound {
		if written-synced >= window {
			cond.Wait()
			continue
		}
		mu.Unlock()
		n, err := f.Write(block[:min(int64(len(block)), size-written)])
		mu.Lock()
		written += int64(n)
		cond.Broadcast()
		if err != nil {
			werr = err
			break
		}
	}
	done = true
	cond.Broadcast()
	for synced < written && syncErr == nil {
		cond.Wait()
	}
	mu.Unlock()
	<-exited
	took := time.Since(start)
	switch {
	case werr != nil:
		return fmt.Errorf("bench: baseline group commit write: %w", werr)
	case syncErr != nil:
		return fmt.Errorf("bench: baseline group commit fsync: %w", syncErr)
	}
	b.GroupCommitBytes, b.GroupCommitWindow, b.GroupCommitFsyncs = written, window, fsyncs
	b.GroupCommitSeconds = took.Seconds()
	b.GroupCommitMBPerS = mbPerS(written, took)
	return nil
}

// measurePacedWrite appends block to f every pacedInterval for d, timing
// each write, as a partition appends a producer's batches at a moderate
// rate. Its percentiles are the least a produce acknowledgement waits for
// the append alone, whatever the broker: on a virtual machine whose fresh
// memory is slow to touch, the page cache's tail is milliseconds.
func (b *Baseline) measurePacedWrite(ctx context.Context, f *os.File, block []byte, d time.Duration) error {
	lat := NewLatencies()
	start := time.Now()
	next := start
	var written int64
	for ctx.Err() == nil && time.Since(start) < d {
		t := time.Now()
		n, err := f.Write(block)
		lat.Record(time.Since(t))
		written += int64(n)
		if err != nil {
			return fmt.Errorf("bench: baseline paced write: %w", err)
		}
		next = next.Add(pacedInterval)
		if wait := time.Until(next); wait > 0 {
			time.Sleep(wait)
		}
	}
	took := time.Since(start)
	b.PacedWriteBytes, b.PacedWriteSeconds = written, took.Seconds()
	b.PacedWriteMBPerS = mbPerS(written, took)
	b.PacedWriteP50Ms, b.PacedWriteP99Ms, b.PacedWriteMaxMs = lat.QuantileMs(0.5), lat.QuantileMs(0.99), lat.MaxMs()
	return nil
}

// measureLoopback writes 64 KiB blocks on one loopback connection for d and
// counts what the other end read.
func (b *Baseline) measureLoopback(ctx context.Context, d time.Duration) error {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("bench: baseline loopback: %w", err)
	}
	defer l.Close()
	var received atomic.Int64
	done := make(chan error, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			done <- err
			return
		}
		defer c.Close()
		buf := make([]byte, loopbackBlock)
		for {
			n, err := c.Read(buf)
			received.Add(int64(n))
			if err != nil {
				if errors.Is(err, io.EOF) {
					err = nil
				}
				done <- err
				return
			}
		}
	}()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		return fmt.Errorf("bench: baseline loopback: %w", err)
	}
	block := make([]byte, loopbackBlock)
	_, _ = rand.Read(block)
	start := time.Now()
	_ = c.SetWriteDeadline(start.Add(d + time.Second))
	var werr error
	for time.Since(start) < d && ctx.Err() == nil {
		if _, werr = c.Write(block); werr != nil {
			break
		}
	}
	c.Close()
	rerr := <-done
	took := time.Since(start)
	if werr != nil {
		return fmt.Errorf("bench: baseline loopback write: %w", werr)
	}
	if rerr != nil {
		return fmt.Errorf("bench: baseline loopback read: %w", rerr)
	}
	b.LoopbackBytes = received.Load()
	b.LoopbackSeconds = took.Seconds()
	b.LoopbackMBPerS = mbPerS(b.LoopbackBytes, took)
	return nil
}

// diskRow is the baseline row a workload row's disk ratio divides by: the
// file write for produce (the group commit for acks=all), the file read
// for the consumer rows.
func diskRow(workload string, acks int) string {
	switch {
	case workload == RowProduce && acks == -1:
		return RowGroupCommit
	case workload == RowProduce:
		return RowFileWrite
	}
	return RowFileRead
}

// mbPerSOf is the MB/s of the baseline row named row, 0 for none.
func (b *Baseline) mbPerSOf(row string) float64 {
	for _, r := range b.Rows() {
		if r.Workload == row {
			return r.MBPerS
		}
	}
	return 0
}

// applyRatios sets res's ratios: MB/s over the MB/s of its disk row (see
// diskRow), named in BaselineRow, and over loopback TCP's for every row.
func (b *Baseline) applyRatios(res *Result, acks int) {
	res.BaselineRow = diskRow(res.Workload, acks)
	res.RatioToBaseline = ratio(res.MBPerS, b.mbPerSOf(res.BaselineRow))
	res.RatioToLoopback = ratio(res.MBPerS, b.LoopbackMBPerS)
}

func ratio(a, b float64) *float64 {
	r := 0.0
	if b > 0 {
		r = a / b
	}
	return &r
}

func mbPerS(bytes int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(bytes) / 1e6 / d.Seconds()
}
