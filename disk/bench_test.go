package disk

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/depot-dev/depot/wire"
)

// benchBatch is 64 records of 1 KiB: a 64 KiB batch.
func benchBatch(b *testing.B) []byte {
	return makeBatch(b, 64, 1024, 1)
}

// writeFileBytes bounds what either write benchmark keeps on disk. Each
// writes into a fresh directory and, every writeFileBytes, starts a new file
// and deletes the old one (the log by rolling its segment and applying a
// retention of 0 bytes), so neither fills the page cache and meets the
// kernel's dirty-page throttling while the other does not: both measure
// copies into the page cache, under the same conditions, whatever order
// they run in.
const writeFileBytes = 64 << 20

// BenchmarkAppend appends through Append, which checks each batch's CRC.
func BenchmarkAppend(b *testing.B) { benchmarkAppend(b, false) }

// BenchmarkAppendValidated appends through AppendValidated, the broker's
// path: the partition has checked the CRC while validating the request.
func BenchmarkAppendValidated(b *testing.B) { benchmarkAppend(b, true) }

func benchmarkAppend(b *testing.B, validated bool) {
	batch := benchBatch(b)
	header, err := wire.Validate(batch)
	require.NoError(b, err)
	l := openLog(b, OS, filepath.Join(b.TempDir(), "t-0"), testOptions(newClock(), func(c *Config) {
		c.SegmentBytes = writeFileBytes
		c.RetentionBytes = 0
	}))
	b.SetBytes(int64(len(batch)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var res AppendResult
		var err error
		if validated {
			res, err = l.AppendValidated(batch, header)
		} else {
			res, err = l.Append(batch)
		}
		if err != nil {
			b.Fatal(err)
		}
		if res.Position == 0 && i > 0 {
			if _, err := l.ApplyRetention(); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.StopTimer()
	require.NoError(b, l.Close())
}

// BenchmarkBaselineWrite writes the batches of BenchmarkAppend to a file
// with nothing else: copies into the page cache.
func BenchmarkBaselineWrite(b *testing.B) { benchmarkBaselineWrite(b, false) }

// BenchmarkBaselineWriteback is BenchmarkBaselineWrite starting writeback of
// every writebackBytes written, as a segment does (sync_file_range): a
// sustained write is then bound by the device, not by the page cache, and
// this is the limit of a sustained BenchmarkAppend.
func BenchmarkBaselineWriteback(b *testing.B) { benchmarkBaselineWrite(b, true) }

func benchmarkBaselineWrite(b *testing.B, writeback bool) {
	batch := benchBatch(b)
	dir := b.TempDir()
	var f *os.File
	var name string
	var size, writtenBack int64
	next := func(n int) {
		if f != nil {
			require.NoError(b, f.Close())
			require.NoError(b, os.Remove(name))
		}
		name = filepath.Join(dir, fmt.Sprintf("baseline-%d", n))
		var err error
		f, err = os.Create(name)
		require.NoError(b, err)
		size, writtenBack = 0, 0
	}
	next(0)
	if _, ok := File(osFile{f}).(writebacker); writeback && !ok {
		b.Skip("no writeback on this OS")
	}
	b.SetBytes(int64(len(batch)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if size+int64(len(batch)) > writeFileBytes {
			next(i)
		}
		if _, err := f.Write(batch); err != nil {
			b.Fatal(err)
		}
		size += int64(len(batch))
		if writeback && size-writtenBack >= writebackBytes {
			if err := File(osFile{f}).(writebacker).StartWriteback(writtenBack, size-writtenBack); err != nil {
				b.Fatal(err)
			}
			writtenBack = size
		}
	}
	b.StopTimer()
	require.NoError(b, f.Close())
}

// readLogBytes is the size of the log the read benchmarks scan.
const readLogBytes = 256 << 20

func BenchmarkRead(b *testing.B) {
	batch := benchBatch(b)
	l := openLog(b, OS, filepath.Join(b.TempDir(), "t-0"), testOptions(newClock(), func(c *Config) { c.SegmentBytes = 64 << 20 }))
	for n := 0; n < readLogBytes/len(batch); n++ {
		_, err := l.Append(batch)
		require.NoError(b, err)
	}
	const maxBytes = 1 << 20
	buf := make([]byte, 0, 2*maxBytes)
	b.SetBytes(maxBytes)
	b.ReportAllocs()
	b.ResetTimer()
	var offset int64
	for i := 0; i < b.N; i++ {
		if offset >= l.EndOffset() {
			offset = 0
		}
		got, err := l.Read(offset, maxBytes, buf[:0])
		if err != nil || len(got) == 0 {
			b.Fatal(err, len(got))
		}
		offset += int64(len(got)/len(batch)) * 64
	}
	b.StopTimer()
	require.NoError(b, l.Close())
}

func BenchmarkBaselineRead(b *testing.B) {
	batch := benchBatch(b)
	f, err := os.Create(filepath.Join(b.TempDir(), "baseline"))
	require.NoError(b, err)
	for n := 0; n < readLogBytes/len(batch); n++ {
		_, err := f.Write(batch)
		require.NoError(b, err)
	}
	const maxBytes = 1 << 20
	chunk := maxBytes / len(batch) * len(batch)
	buf := make([]byte, 2*maxBytes)
	b.SetBytes(maxBytes)
	b.ReportAllocs()
	b.ResetTimer()
	var pos int64
	for i := 0; i < b.N; i++ {
		if pos+int64(chunk) > readLogBytes {
			pos = 0
		}
		if _, err := f.ReadAt(buf[:chunk], pos); err != nil {
			b.Fatal(err)
		}
		pos += int64(chunk)
	}
	b.StopTimer()
	require.NoError(b, f.Close())
}

// BenchmarkLookup reads one batch at a random offset of a log of small
// records (10-byte values, 1000 per batch) in small segments.
func BenchmarkLookup(b *testing.B) {
	for _, records := range []int{100_000, 1_000_000, 10_000_000} {
		b.Run(fmt.Sprintf("records=%d", records), func(b *testing.B) {
			batch := makeBatch(b, 1000, 10, 1)
			l := openLog(b, OS, filepath.Join(b.TempDir(), "t-0"), testOptions(newClock(), func(c *Config) { c.SegmentBytes = 1 << 20 }))
			for n := 0; n < records/1000; n++ {
				_, err := l.Append(batch)
				require.NoError(b, err)
			}
			b.Logf("%d records in %d segments", l.EndOffset(), len(l.Segments()))
			rng := rand.New(rand.NewPCG(1, 2))
			buf := make([]byte, 0, 2*len(batch))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				got, err := l.Read(rng.Int64N(l.EndOffset()), 1, buf[:0])
				if err != nil || len(got) != len(batch) {
					b.Fatal(err, len(got))
				}
			}
			b.StopTimer()
			require.NoError(b, l.Close())
		})
	}
}

// BenchmarkReadReopen reads from many partitions in turn, each read from
// the next one, with their files kept open (a cache without bound) and
// with the cache holding one descriptor, so that every read finds its
// files closed and reopens them (and closes another's): the cost of a
// reopen, next to reads of one 64 KiB batch and of 1 MiB. The data is in
// the page cache in both cases.
func BenchmarkReadReopen(b *testing.B) {
	const partitions = 64
	dir := b.TempDir()
	batch := makeBatch(b, 64, 1024, 1) // 64 KiB
	opts := testOptions(newClock(), func(c *Config) { c.SegmentBytes = 1 << 20 })
	ends := make([]int64, partitions)
	for i := range ends {
		l := openLog(b, OS, filepath.Join(dir, fmt.Sprintf("t-%d", i)), opts)
		for l.Size() < 2<<20 {
			_, err := l.Append(append([]byte(nil), batch...))
			require.NoError(b, err)
		}
		ends[i] = l.EndOffset()
		require.NoError(b, l.Close())
	}
	for _, files := range []struct {
		name     string
		capacity int
	}{{"open", 0}, {"evicted", 1}} {
		for _, read := range []struct {
			name     string
			maxBytes int
		}{{"batch", 1}, {"1MiB", 1 << 20}} {
			b.Run(fmt.Sprintf("files=%s/read=%s", files.name, read.name), func(b *testing.B) {
				cache := NewFileCache(files.capacity)
				logs := make([]*Log, partitions)
				for i := range logs {
					o := opts
					o.Files, o.RecoveryPoint = cache, ends[i]
					logs[i] = openLog(b, OS, filepath.Join(dir, fmt.Sprintf("t-%d", i)), o)
				}
				buf := make([]byte, 0, 2<<20)
				rng := rand.New(rand.NewPCG(1, 2))
				before := cache.Stats()
				b.SetBytes(int64(max(read.maxBytes, len(batch))))
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					l := logs[i%partitions]
					got, err := l.Read(rng.Int64N(l.EndOffset()), read.maxBytes, buf[:0])
					if err != nil || len(got) == 0 {
						b.Fatal(err, len(got))
					}
				}
				b.StopTimer()
				after := cache.Stats()
				b.ReportMetric(float64(after.Reopens-before.Reopens)/float64(b.N), "reopens/op")
				for _, l := range logs {
					require.NoError(b, l.Close())
				}
			})
		}
	}
}

// BenchmarkFirstAppendOfEpoch appends the first batch of a new leader
// epoch to each of many fresh logs on the OS file system, as a topic of
// many partitions takes its first writes once its leaders are elected:
// one op is one log's append, timed alone (opening and removing the logs
// is not).
func BenchmarkFirstAppendOfEpoch(b *testing.B) { benchmarkFirstAppendOfEpoch(b, false) }

// BenchmarkFirstAppendAndFlushOfEpoch is BenchmarkFirstAppendOfEpoch with
// the group commit that acks=all waits for after it, a FlushJob run on
// the same goroutine: what the first write of an epoch costs in all.
func BenchmarkFirstAppendAndFlushOfEpoch(b *testing.B) { benchmarkFirstAppendOfEpoch(b, true) }

func benchmarkFirstAppendOfEpoch(b *testing.B, flush bool) {
	batch := makeBatch(b, 4, 100, 1)
	wire.SetLeaderEpoch(batch, 1)
	header, err := wire.Validate(batch)
	require.NoError(b, err)
	dir := b.TempDir()
	opts := testOptions(newClock(), nil)
	opts.LeaderEpoch = 1
	// Logs are opened a chunk at a time, untimed, then appended to.
	const chunk = 64
	logs := make([]*Log, 0, chunk)
	b.ResetTimer()
	for done := 0; done < b.N; done += len(logs) {
		b.StopTimer()
		logs = logs[:0]
		for i := 0; i < chunk && done+i < b.N; i++ {
			logs = append(logs, openLog(b, OS, filepath.Join(dir, fmt.Sprintf("t-%d", done+i)), opts))
		}
		b.StartTimer()
		for _, l := range logs {
			if _, err := l.AppendValidated(batch, header); err != nil {
				b.Fatal(err)
			}
			if !flush {
				continue
			}
			j, err := l.StartFlush()
			if err != nil {
				b.Fatal(err)
			}
			if err := l.FinishFlush(j, j.Run()); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		for _, l := range logs {
			require.NoError(b, l.Delete())
		}
		b.StartTimer()
	}
}
