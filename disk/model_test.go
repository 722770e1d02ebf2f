package disk

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/depot-dev/depot/wire"
)

// modelBatch is a batch as the model keeps it: its offsets and bytes.
type modelBatch struct {
	base, last int64
	data       []byte
}

// logModel is the simple in-memory log the real one is checked against.
type logModel struct {
	batches    []modelBatch
	start, end int64
	durable    int64 // offsets below it survive a crash
}

func (m *logModel) visible() []modelBatch {
	i := 0
	for i < len(m.batches) && m.batches[i].last < m.start {
		i++
	}
	return m.batches[i:]
}

func (m *logModel) truncateTo(offset int64) {
	if offset >= m.end {
		return
	}
	vis := m.visible()
	if len(vis) == 0 || offset <= vis[0].last {
		s := min(offset, m.start)
		m.batches, m.start, m.end = nil, s, s
		m.durable = min(m.durable, s)
		return
	}
	n := len(m.batches)
	for n > 0 && m.batches[n-1].last >= offset {
		n--
	}
	m.batches = m.batches[:n]
	m.end = m.batches[n-1].last + 1
	m.durable = min(m.durable, m.end)
}

// read is what Log.Read must return: whole batches from the one holding
// offset, greedily up to maxBytes, at least one.
func (m *logModel) read(offset int64, maxBytes int) []byte {
	var out []byte
	for _, b := range m.batches {
		if b.last < offset {
			continue
		}
		if len(out) > 0 && len(out)+len(b.data) > maxBytes {
			break
		}
		out = append(out, b.data...)
	}
	return out
}

func TestModel(t *testing.T) {
	seeds := []int64{1, time.Now().UnixNano(), time.Now().UnixNano() + 1}
	for _, fc := range fsCases {
		for _, seed := range seeds {
			t.Run(fmt.Sprintf("%s/seed%d", fc.name, seed), func(t *testing.T) {
				defer func() {
					if t.Failed() {
						t.Logf("reproduce with seed %d", seed)
					}
				}()
				runModel(t, fc, seed, 600)
			})
		}
	}
}

func runModel(t *testing.T, fc fsCase, seed int64, steps int) {
	rng := rand.New(rand.NewPCG(uint64(seed), 7))
	fs, dir := fc.new(t)
	mem := memOf(fs)
	clock := newClock()
	opts := testOptions(clock, func(c *Config) {
		c.SegmentBytes = int64(300 + rng.IntN(2000))
		c.IndexIntervalBytes = rng.IntN(500)
		c.RetentionBytes = int64(2000 + rng.IntN(4000))
		c.RetentionMs = time.Hour
	})
	l := openLog(t, fs, dir, opts)
	m := &logModel{}
	// full reports whether err is a full file system's, which only a MemFS
	// with a capacity gives, and which leaves the log usable.
	full := func(err error, step int, op string) bool {
		if err == nil {
			return false
		}
		require.ErrorIs(t, err, ErrNoSpace, "step %d %s", step, op)
		require.NotNil(t, mem, "step %d %s", step, op)
		require.NoError(t, l.failed, "step %d %s", step, op)
		return true
	}
	reopen := func() {
		o := opts
		o.RecoveryPoint = l.RecoveryPoint()
		o.LogStartOffset = m.start
		var err error
		if l, err = Open(fs, dir, withFiles(fs, o)); errors.Is(err, ErrNoSpace) && mem != nil {
			// Recovery had indexes to rebuild and found no room.
			mem.SetCapacity(-1)
			l, err = Open(fs, dir, withFiles(fs, o))
		}
		require.NoError(t, err)
	}
	check := func(step int, op string) {
		require.Equal(t, m.start, l.StartOffset(), "step %d %s", step, op)
		require.Equal(t, m.end, l.EndOffset(), "step %d %s", step, op)
		for _, b := range m.visible() {
			got, err := l.Read(max(b.base, m.start), 1, nil)
			require.NoError(t, err, "step %d %s", step, op)
			require.Equal(t, b.data, got, "step %d %s: batch %d", step, op, b.base)
		}
	}
	for step := 0; step < steps; step++ {
		clock.now = clock.now.Add(time.Duration(rng.IntN(60)) * time.Second)
		var op string
		switch p := rng.IntN(100); {
		case p < 45:
			op = "append"
			b := makeBatch(t, 1+rng.IntN(5), rng.IntN(200), clock.now.UnixMilli())
			res, err := l.Append(b)
			if full(err, step, op) {
				break
			}
			require.NoError(t, err)
			require.Equal(t, m.end, res.BaseOffset)
			m.batches = append(m.batches, modelBatch{base: res.BaseOffset, last: res.LastOffset, data: b})
			m.end = res.LastOffset + 1
		case p < 60:
			op = "read"
			off := m.start + rng.Int64N(m.end-m.start+1)
			maxBytes := rng.IntN(3000)
			got, err := l.Read(off, maxBytes, nil)
			require.NoError(t, err)
			require.Equal(t, m.read(off, maxBytes), got, "read %d max %d", off, maxBytes)
			_, err = l.Read(m.end+1, 1, nil)
			require.ErrorIs(t, err, ErrOffsetOutOfRange)
		case p < 66:
			op = "roll"
			if err := l.Roll(); !full(err, step, op) {
				require.NoError(t, err)
			}
		case p < 70:
			op = "retention"
			_, err := l.ApplyRetention()
			require.NoError(t, err)
			newStart := l.StartOffset()
			require.GreaterOrEqual(t, newStart, m.start)
			if newStart > m.start {
				found := newStart == m.end
				for _, b := range m.batches {
					found = found || b.base == newStart
				}
				require.True(t, found, "retention cuts at a batch boundary")
				m.start = newStart
			}
			require.True(t, opts.RetentionBytes >= l.Size()-l.Segments()[len(l.Segments())-1].Size || len(l.Segments()) == 1)
		case p < 74:
			op = "truncate"
			off := m.start - 2 + rng.Int64N(m.end-m.start+5)
			off = max(off, 0)
			if err := l.TruncateTo(off); !full(err, step, op) {
				require.NoError(t, err)
				m.truncateTo(off)
			}
		case p < 78:
			op = "delete-before"
			off := m.start + rng.Int64N(m.end-m.start+1)
			require.NoError(t, l.DeleteBefore(off))
			m.start = max(m.start, off)
		case p < 86:
			op = "flush"
			if err := l.Flush(m.end - rng.Int64N(3)); !full(err, step, op) {
				require.NoError(t, err)
			}
			m.durable = max(m.durable, l.RecoveryPoint())
		case p < 88:
			op = "capacity"
			if mem == nil {
				continue
			}
			// No limit, or room for a few batches more (or none).
			if rng.IntN(3) == 0 {
				mem.SetCapacity(-1)
			} else {
				mem.SetCapacity(mem.Used() + rng.Int64N(1500))
			}
		case p < 94:
			op = "reopen"
			// A Close that finds no room for index entries still fsyncs
			// every batch.
			if err := l.Close(); !full(err, step, op) {
				require.NoError(t, err)
			}
			m.durable = m.end
			reopen()
		default:
			if mem == nil {
				continue
			}
			op = "crash"
			if rng.IntN(2) == 0 {
				mem.Crash()
			} else {
				mem.CrashTorn(rng)
			}
			abandon(l)
			reopen()
			end := l.EndOffset()
			require.GreaterOrEqual(t, end, m.durable, "flushed batches survive")
			require.LessOrEqual(t, end, max(m.end, m.start))
			m.truncateTo(end)
			if end > m.end {
				// Emptied at the start offset: the crash lost everything.
				m.batches, m.end = nil, end
			}
			m.durable = end
		}
		check(step, op)
	}
	if err := l.Close(); !full(err, steps, "close") {
		require.NoError(t, err)
	}
}

// TestCrash appends, flushes part, crashes (dropping or tearing the
// unsynced tail) and checks that recovery keeps every flushed batch and
// returns nothing that was not written.
func TestCrash(t *testing.T) {
	for _, torn := range []bool{false, true} {
		for seed := int64(1); seed <= 20; seed++ {
			t.Run(fmt.Sprintf("torn=%v/seed%d", torn, seed), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(uint64(seed), 7))
				fs := NewMemFS()
				opts := testOptions(newClock(), func(c *Config) {
					c.SegmentBytes = 1500
					c.IndexIntervalBytes = 200
				})
				l := openLog(t, fs, "/p", opts)
				var batches [][]byte
				var flushed int64
				for i := 0; i < 60; i++ {
					b := makeBatch(t, 1+rng.IntN(4), rng.IntN(300), int64(i))
					_, err := l.Append(b)
					require.NoError(t, err)
					batches = append(batches, b)
					if rng.IntN(8) == 0 {
						require.NoError(t, l.Flush(l.EndOffset()))
						flushed = l.EndOffset()
					}
				}
				if torn {
					fs.CrashTorn(rng)
				} else {
					fs.Crash()
				}
				opts.RecoveryPoint = l.RecoveryPoint()
				l = openLog(t, fs, "/p", opts)
				end := l.EndOffset()
				require.GreaterOrEqual(t, end, flushed)
				var want []byte
				for _, b := range batches {
					h, err := wire.ParseHeader(b)
					require.NoError(t, err)
					if h.LastOffset() < end {
						want = append(want, b...)
					} else {
						require.Equal(t, end, h.BaseOffset, "the end falls on a batch boundary")
						break
					}
				}
				got, err := l.Read(0, 1<<30, nil)
				require.NoError(t, err)
				require.Equal(t, want, got)
				requireReadable(t, l)
				// The recovered log takes appends where it ended.
				res, err := l.Append(makeBatch(t, 1, 1, 0))
				require.NoError(t, err)
				require.Equal(t, end, res.BaseOffset)
				require.NoError(t, l.Close())
			})
		}
	}
}

// TestErrorInjection fails the n-th file operation of a run of appends,
// rolls and flushes, for every n, then crashes and reopens: everything
// flushed before the error is intact.
func TestErrorInjection(t *testing.T) {
	batches := make([][]byte, 24)
	for i := range batches {
		batches[i] = makeBatch(t, 1+i%3, 40*(i%5), int64(i))
	}
	opts := testOptions(newClock(), func(c *Config) {
		c.SegmentBytes = 700
		c.IndexIntervalBytes = 100
	})
	// run returns the end offset flushed before the first error.
	run := func(fs FS) (flushed int64, err error) {
		l, err := Open(fs, "/p", opts)
		if err != nil {
			return 0, err
		}
		for i, b := range batches {
			if _, err := l.Append(append([]byte(nil), b...)); err != nil {
				return flushed, err
			}
			if i%4 == 3 {
				if err := l.Flush(l.EndOffset()); err != nil {
					return flushed, err
				}
				flushed = l.EndOffset()
			}
			if i%7 == 6 {
				if err := l.Roll(); err != nil {
					return flushed, err
				}
			}
		}
		if err := l.Close(); err != nil {
			return flushed, err
		}
		return l.EndOffset(), nil
	}
	probe := NewErrorFS(NewMemFS())
	_, err := run(probe)
	require.NoError(t, err)
	ops := probe.Ops()
	require.Greater(t, ops, int64(50))
	var want []byte
	var next int64
	for _, b := range batches {
		b = append([]byte(nil), b...)
		wire.SetBaseOffset(b, next)
		h, err := wire.ParseHeader(b)
		require.NoError(t, err)
		next = h.NextOffset()
		want = append(want, b...)
	}
	for n := int64(1); n <= 2*ops; n++ {
		mem := NewMemFS()
		efs := NewErrorFS(mem)
		if n > ops {
			// Second pass: the failing write leaves a torn prefix.
			efs.TornWrites(rand.New(rand.NewPCG(uint64(n), 3)))
		}
		efs.InjectAt((n-1)%ops + 1)
		flushed, err := run(efs)
		require.Error(t, err, "op %d of %d", n, ops)
		require.ErrorIs(t, err, ErrInjected)
		mem.Crash()
		l, err := Open(mem, "/p", opts)
		require.NoError(t, err, "op %d", n)
		require.GreaterOrEqual(t, l.EndOffset(), flushed, "op %d", n)
		got, err := l.Read(0, 1<<30, []byte{})
		require.NoError(t, err)
		require.Equal(t, want[:len(got)], got, "op %d", n)
		requireReadable(t, l)
		require.NoError(t, l.Close())
	}
}

// abandon lets go of the descriptors of a log whose process "died" in a
// crash, without a write or a sync (as a process's death closes them):
// their room in a shared file cache goes to the log opened after.
func abandon(l *Log) {
	for _, s := range l.segments {
		for _, f := range []File{s.log, s.index.file, s.timeIndex.file} {
			_ = f.Close()
		}
	}
}
