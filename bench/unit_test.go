package bench

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"
	"gonum.org/v1/plot"
)

func TestTokenBucket(t *testing.T) {
	t0 := time.Unix(1000, 0)
	tests := []struct {
		name  string
		rate  float64
		steps []time.Duration // time of each reserve since t0
		want  []time.Duration // pause each reserve asks for
	}{
		{"first token is free", 10, []time.Duration{0}, []time.Duration{0}},
		{"second token owed a tenth of a second", 10, []time.Duration{0, 0}, []time.Duration{0, 100 * time.Millisecond}},
		{"debt accumulates", 10, []time.Duration{0, 0, 0}, []time.Duration{0, 100 * time.Millisecond, 200 * time.Millisecond}},
		{"time repays debt", 10, []time.Duration{0, 0, 100 * time.Millisecond}, []time.Duration{0, 100 * time.Millisecond, 100 * time.Millisecond}},
		{"on pace never waits", 10, []time.Duration{0, 100 * time.Millisecond, 200 * time.Millisecond}, []time.Duration{0, 0, 0}},
		{"idle time is capped at a burst of one", 10, []time.Duration{0, 10 * time.Second, 10 * time.Second}, []time.Duration{0, 0, 100 * time.Millisecond}},
		{"burst is 10 ms worth at high rates", 100_000, []time.Duration{time.Second, time.Second}, []time.Duration{0, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newTokenBucket(tt.rate, t0)
			for i, at := range tt.steps {
				require.InDelta(t, float64(tt.want[i]), float64(b.reserve(t0.Add(at))), float64(time.Microsecond), "step %d", i)
			}
		})
	}
}

func TestTokenBucketPacesLongRun(t *testing.T) {
	// 100k records at 50k/s take two seconds of pauses, taken at most once
	// per millisecond of debt rather than once per record.
	b := newTokenBucket(50_000, time.Unix(0, 0))
	now := time.Unix(0, 0)
	pauses := 0
	for range 100_000 {
		if d := b.reserve(now); d >= minPause {
			now = now.Add(d)
			pauses++
		}
	}
	require.InDelta(t, 2.0, now.Sub(time.Unix(0, 0)).Seconds(), 0.01)
	require.LessOrEqual(t, pauses, 2000)
	require.Greater(t, pauses, 100)
}

func TestLatencies(t *testing.T) {
	l := NewLatencies()
	for i := 1; i <= 1000; i++ {
		l.Record(time.Duration(i) * time.Millisecond)
	}
	l.Record(0)                 // clamped to 1 us
	l.Record(100 * time.Minute) // clamped to 60 s
	require.Equal(t, int64(1002), l.Count())
	require.InDelta(t, 500, l.QuantileMs(0.5), 1)
	require.InDelta(t, 990, l.QuantileMs(0.99), 2)
	require.InDelta(t, 60_000, l.MaxMs(), 60)

	other := NewLatencies()
	other.Record(time.Second)
	l.Merge(other)
	require.Equal(t, int64(1003), l.Count())

	pts := l.Percentiles()
	require.NotEmpty(t, pts)
	require.Equal(t, 1.0, pts[0].X)
	require.InDelta(t, 0.001, pts[0].Ms, 0.0001, "the first point is the minimum")
	for i := 1; i < len(pts); i++ {
		require.GreaterOrEqual(t, pts[i].X, pts[i-1].X)
		require.GreaterOrEqual(t, pts[i].Ms, pts[i-1].Ms)
	}
	require.LessOrEqual(t, pts[len(pts)-2].X, 1003.0, "no point beyond the count's resolution")
	require.Nil(t, NewLatencies().Percentiles())
}

func TestCoresBetween(t *testing.T) {
	at := time.Unix(1000, 0)
	from := cpuMark{at: at, cpu: 2 * time.Second, ok: true}
	to := cpuMark{at: at.Add(2 * time.Second), cpu: 5 * time.Second, ok: true}
	require.InDelta(t, 1.5, coresBetween(from, to), 1e-9)
	require.Zero(t, coresBetween(from, from), "an empty span")
	require.Zero(t, coresBetween(to, from), "a span backwards")
	require.Zero(t, coresBetween(cpuMark{at: at}, to), "no reading at the start")
	require.Zero(t, coresBetween(from, cpuMark{at: to.at, cpu: to.cpu}), "no reading at the end")

	// The marks see the CPU a busy loop uses.
	a := markCPU()
	require.True(t, a.ok)
	for time.Since(a.at) < 50*time.Millisecond {
	}
	b := markCPU()
	require.Greater(t, b.cpu, a.cpu, "the loop used CPU")
}

func TestParseVmHWM(t *testing.T) {
	tests := []struct {
		name    string
		status  string
		want    int64
		wantErr bool
	}{
		{"linux", "Name:\tbench\nVmPeak:\t  999 kB\nVmHWM:\t   1234 kB\nVmRSS:\t 1000 kB\n", 1234 * 1024, false},
		{"missing", "Name:\tbench\n", 0, true},
		{"no unit", "VmHWM:\t1234\n", 0, true},
		{"not a number", "VmHWM:\tlots kB\n", 0, true},
		{"negative", "VmHWM:\t-5 kB\n", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseVmHWM([]byte(tt.status))
			if tt.wantErr {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

func FuzzParseVmHWM(f *testing.F) {
	f.Add([]byte("VmHWM:\t   1234 kB\n"))
	f.Add([]byte("VmHWM: 99999999999999999999 kB"))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, status []byte) {
		n, err := parseVmHWM(status)
		if err == nil {
			require.GreaterOrEqual(t, n, int64(0))
		}
	})
}

func TestConfigDefaultsAndErrors(t *testing.T) {
	cfg, err := Config{}.withDefaults()
	require.NoError(t, err)
	require.Equal(t, DefaultRecordSize, cfg.RecordSize)
	require.Equal(t, int64(DefaultRecords), cfg.Records)
	require.Equal(t, DefaultDuration, cfg.Duration)
	require.Equal(t, 1, cfg.Acks)
	require.Equal(t, WorkloadBoth, cfg.Workload)
	require.Regexp(t, `^depot-bench-[0-9a-f]{8}$`, cfg.Topic)

	bounds := []struct {
		name         string
		in           Config
		wantRecords  int64
		wantDuration time.Duration
	}{
		{"neither: both defaults", Config{}, DefaultRecords, DefaultDuration},
		{"duration alone: ended by time", Config{Duration: 10 * time.Second}, 0, 10 * time.Second},
		{"records alone: the default duration bounds it", Config{Records: 5}, 5, DefaultDuration},
		{"both", Config{Records: 5, Duration: time.Second}, 5, time.Second},
	}
	for _, tt := range bounds {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.in.withDefaults()
			require.NoError(t, err)
			require.Equal(t, tt.wantRecords, got.Records)
			require.Equal(t, tt.wantDuration, got.Duration)
			require.Equal(t, tt.wantRecords > 0, got.countBound())
			require.Positive(t, got.Duration, "never unbounded in time")
		})
	}

	cfg, err = Config{AcksSet: true}.withDefaults()
	require.NoError(t, err)
	require.Equal(t, 0, cfg.Acks)

	bad := []struct {
		name string
		cfg  Config
	}{
		{"record too small for the send time", Config{RecordSize: 7}},
		{"negative records", Config{Records: -1}},
		{"acks 2", Config{Acks: 2}},
		{"unknown workload", Config{Workload: "read"}},
		{"negative rate", Config{Rate: -1}},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.cfg.withDefaults()
			require.ErrorIs(t, err, ErrConfig)
		})
	}
}

func TestResolveBrokers(t *testing.T) {
	tests := []struct {
		name     string
		flag     string
		flagSet  bool
		env      string
		envSet   bool
		embedded bool
		want     []string
		wantErr  string
	}{
		{name: "neither: embedded"},
		{name: "--embedded", embedded: true},
		{name: "--brokers", flag: "a:1, b:2", flagSet: true, want: []string{"a:1", "b:2"}},
		{name: "DEPOT_BROKERS", env: "c:3", envSet: true, want: []string{"c:3"}},
		{name: "--brokers wins over DEPOT_BROKERS", flag: "a:1", flagSet: true, env: "c:3", envSet: true, want: []string{"a:1"}},
		{name: "--embedded and --brokers", flag: "a:1", flagSet: true, embedded: true, wantErr: "--embedded and --brokers"},
		{name: "--embedded and DEPOT_BROKERS", env: "c:3", envSet: true, embedded: true, wantErr: "unset it, or leave out --embedded"},
		{name: "--embedded and an empty DEPOT_BROKERS", envSet: true, embedded: true, wantErr: "DEPOT_BROKERS=\"\""},
		{name: "--brokers naming nothing", flag: ",", flagSet: true, wantErr: "names no address"},
		{name: "DEPOT_BROKERS set and empty", envSet: true, wantErr: "DEPOT_BROKERS \"\" names no address"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := resolveBrokers(tt.flag, tt.flagSet, tt.env, tt.envSet, tt.embedded)
			if tt.wantErr != "" {
				require.ErrorIs(t, err, ErrConfig)
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestBaselineMeasures(t *testing.T) {
	dir := t.TempDir()
	b, err := MeasureBaseline(t.Context(), dir, 4<<20, 1<<20, 100*time.Millisecond)
	require.NoError(t, err)
	require.Equal(t, int64(4<<20), b.FileBytes)
	require.Equal(t, int64(4<<20), b.GroupCommitBytes)
	require.Equal(t, int64(1<<20), b.GroupCommitWindow)
	require.Positive(t, b.GroupCommitMBPerS)
	// Each fsync covers at most the window the writer may run ahead.
	require.GreaterOrEqual(t, b.GroupCommitFsyncs, 4)
	require.Positive(t, b.FileWriteMBPerS)
	require.Positive(t, b.FileFsyncMBPerS)
	require.GreaterOrEqual(t, b.FileWriteMBPerS, b.FileFsyncMBPerS, "the fsync is inside the second timing")
	require.Positive(t, b.FileReadMBPerS)
	require.Positive(t, b.LoopbackBytes)
	require.Positive(t, b.LoopbackMBPerS)
	// The paced write writes 128 KiB a millisecond for the 100 ms given,
	// timing each write.
	require.Zero(t, b.PacedWriteBytes%pacedBlock)
	require.GreaterOrEqual(t, b.PacedWriteBytes, int64(10*pacedBlock))
	require.LessOrEqual(t, b.PacedWriteBytes, int64(101*pacedBlock), "paced, not as fast as it can")
	require.GreaterOrEqual(t, b.PacedWriteSeconds, 0.1)
	require.Positive(t, b.PacedWriteP50Ms)
	require.GreaterOrEqual(t, b.PacedWriteP99Ms, b.PacedWriteP50Ms)
	require.GreaterOrEqual(t, b.PacedWriteMaxMs, b.PacedWriteP99Ms)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, entries, "the baseline file is removed")

	res := Result{Workload: RowProduce, MBPerS: b.GroupCommitMBPerS}
	b.applyRatios(&res, -1)
	require.InDelta(t, 1.0, *res.RatioToBaseline, 1e-9, "acks=all compares with the group commit")
	res = Result{Workload: RowProduce, MBPerS: b.FileWriteMBPerS}
	b.applyRatios(&res, 1)
	require.InDelta(t, 1.0, *res.RatioToBaseline, 1e-9, "acks=1 compares with the write")
}

// A read that stops short of the records produced counts as an error of its
// row, unless the run was interrupted; a whole read does not.
func TestCheckReadCountsShortReads(t *testing.T) {
	logger := logrus.New()
	logger.SetOutput(io.Discard)
	r := &run{env: &env{logger: logrus.NewEntry(logger)}}
	var whole, short reading
	whole.records.Store(10)
	short.records.Store(7)

	r.checkRead(t.Context(), &whole, 10, "stopped")
	require.Zero(t, whole.errors.Load())
	require.NoError(t, r.firstErr)

	interrupted, cancel := context.WithCancel(t.Context())
	cancel()
	r.checkRead(interrupted, &short, 10, "stopped")
	require.Zero(t, short.errors.Load())
	require.NoError(t, r.firstErr)

	r.checkRead(t.Context(), &short, 10, "the read stopped")
	require.Equal(t, int64(1), short.errors.Load())
	require.EqualError(t, r.firstErr, "bench: the read stopped with 7 of 10 records read")
}

func TestRateWindow(t *testing.T) {
	t0 := time.Unix(1000, 0)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	type sample struct {
		at    time.Time
		count int64
	}
	// steady is a sample every 100 ms from 0 to until ms, at perSecond
	// from count from.
	steady := func(from int64, perSecond float64, until int) []sample {
		var out []sample
		for at := 0; at <= until; at += 100 {
			out = append(out, sample{ms(at), from + int64(perSecond*float64(at)/1000)})
		}
		return out
	}
	tests := []struct {
		name      string
		samples   []sample
		want      float64
		wantKnown bool
	}{
		{"one sample", []sample{{t0, 5}}, 0, false},
		{"too short a span for a rate", []sample{{t0, 0}, {ms(100), 1_000_000}}, 0, false},
		{"a phase that starts with most records counted", append([]sample{{t0, 900_000}}, sample{ms(300), 930_000}), 100_000, true},
		{"steady", steady(0, 100_000, 5000), 100_000, true},
		{
			"a stall empties the window",
			append(steady(0, 100_000, 2000), sample{ms(5000), 200_000}, sample{ms(5100), 200_000}),
			0, true,
		},
		{
			"a fast start is forgotten after the span",
			append([]sample{{t0, 0}, {ms(1000), 1_000_000}}, func() []sample {
				var out []sample
				for at := 1100; at <= 5000; at += 100 {
					out = append(out, sample{ms(at), 1_000_000 + int64(at-1000)*100})
				}
				return out
			}()...),
			100_000, true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := rateWindow{span: 3 * time.Second}
			for _, s := range tt.samples {
				w.add(s.at, s.count)
			}
			got, known := w.rate()
			require.Equal(t, tt.wantKnown, known)
			require.InDelta(t, tt.want, got, tt.want*0.001+1e-9)
			require.LessOrEqual(t, len(w.samples), 32, "only the window's samples are kept")
			if len(w.samples) > 1 {
				last := w.samples[len(w.samples)-1].at
				require.LessOrEqual(t, last.Sub(w.samples[1].at), 3*time.Second, "the window spans at most a sample past its span")
			}
		})
	}
}

func TestPhaseStatus(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	// window is a window whose rate is perSecond, ending at now.
	window := func(now time.Time, perSecond float64) *rateWindow {
		w := &rateWindow{span: 3 * time.Second}
		w.add(now.Add(-time.Second), 0)
		w.add(now, int64(perSecond))
		return w
	}
	tests := []struct {
		name         string
		bounds       phaseBounds
		w            *rateWindow
		now          time.Time
		count        int64
		wantDone     float64
		wantETA      time.Duration
		wantETAKnown bool
	}{
		{
			"the records left end it first",
			phaseBounds{max: 1_000_000, start: t0, deadline: at(60)}, window(at(3), 100_000), at(3), 300_000,
			0.3, 7 * time.Second, true,
		},
		{
			"the deadline ends it first",
			phaseBounds{max: 1_000_000, start: t0, deadline: at(60)}, window(at(54), 10_000), at(54), 540_000,
			0.9, 6 * time.Second, true,
		},
		{
			"no count bound: the time left",
			phaseBounds{start: t0, deadline: at(10)}, window(at(2.5), 300_000), at(2.5), 750_000,
			0.25, 7500 * time.Millisecond, true,
		},
		{
			"no count bound and no rate yet",
			phaseBounds{start: t0, deadline: at(10)}, &rateWindow{span: 3 * time.Second}, at(0.1), 0,
			0.01, 9900 * time.Millisecond, true,
		},
		{
			"rate unknown: no ETA, done by the further bound",
			phaseBounds{max: 1000, start: t0, deadline: at(10)}, &rateWindow{span: 3 * time.Second}, at(0.1), 900,
			0.9, 0, false,
		},
		{
			"stalled: the deadline",
			phaseBounds{max: 1000, start: t0, deadline: at(30)}, window(at(20), 0), at(20), 500,
			2.0 / 3, 10 * time.Second, true,
		},
		{
			"every record counted",
			phaseBounds{max: 1000, start: t0, deadline: at(30)}, window(at(2), 500), at(2), 1000,
			1, 0, true,
		},
		{
			"past the deadline",
			phaseBounds{start: t0, deadline: at(5)}, window(at(6), 500), at(6), 3000,
			1, 0, true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := phaseStatus(tt.bounds, tt.w, tt.now, tt.count)
			require.Equal(t, tt.count, s.count)
			require.InDelta(t, tt.wantDone, s.done, 1e-9)
			require.Equal(t, tt.wantETAKnown, s.etaKnown)
			require.InDelta(t, float64(tt.wantETA), float64(s.eta), float64(time.Millisecond))
		})
	}
}

func TestProgressDescribe(t *testing.T) {
	known := progressStatus{count: 300_000, rate: 101_234.4, rateKnown: true, eta: 6900 * time.Millisecond, etaKnown: true}
	require.Equal(t, "produce: 300000/1000000 records, 101234 records/s, 7s left", known.describe("produce", 1_000_000))
	require.Equal(t, "produce: 300000 records, 101234 records/s, 7s left", known.describe("produce", 0))
	require.Equal(t, "tail: 5/10 records, - records/s, - left", progressStatus{count: 5}.describe("tail", 10))
}

// The bar a tail phase draws when it starts with most records read shows
// no rate yet, rather than the whole count over an instant.
func TestProgressPhaseStartsFromItsCount(t *testing.T) {
	var out bytes.Buffer
	p := &progress{w: &out}
	var count atomic.Int64
	count.Store(900_000)
	p.phase("tail", 1_000_000, time.Minute, &count)
	count.Store(910_000)
	p.update()
	require.Contains(t, out.String(), "tail: 910000/1000000 records, - records/s, - left")
	p.finish()
	p.finish()
	(*progress)(nil).update()
}

func TestDiskRow(t *testing.T) {
	tests := []struct {
		workload string
		acks     int
		want     string
	}{
		{RowProduce, 0, RowFileWrite},
		{RowProduce, 1, RowFileWrite},
		{RowProduce, -1, RowGroupCommit},
		{RowEndToEnd, -1, RowFileRead},
		{RowConsume, 1, RowFileRead},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s acks=%d", tt.workload, tt.acks), func(t *testing.T) {
			require.Equal(t, tt.want, diskRow(tt.workload, tt.acks))
		})
	}
}

// The text report says what the ratio columns are ratios of: each row's
// MB/s over which baseline row's, with its figure.
func TestWriteTextNamesTheRatios(t *testing.T) {
	b := &Baseline{FileWriteMBPerS: 800, FileReadMBPerS: 4000, GroupCommitMBPerS: 400, LoopbackMBPerS: 2000}
	tests := []struct {
		name string
		acks int
		want []string
	}{
		{"acks=1", 1, []string{
			"x disk: the row's MB/s over baseline-file-write's 800.0 MB/s (produce, acks=1), over baseline-file-read's 4000.0 MB/s (end-to-end, consume)\n",
			"x loopback: the row's MB/s over baseline-loopback-tcp's 2000.0 MB/s\n",
		}},
		{"acks=all", -1, []string{
			"x disk: the row's MB/s over baseline-file-group-commit's 400.0 MB/s (produce, acks=all), over baseline-file-read's",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep := &Report{Config: Config{Acks: tt.acks, Topic: "t"}, Baseline: b}
			for _, w := range []string{RowProduce, RowEndToEnd, RowConsume} {
				res := Result{Workload: w, Acks: tt.acks, MBPerS: 200}
				b.applyRatios(&res, tt.acks)
				rep.Results = append(rep.Results, res)
			}
			require.InDelta(t, 200/b.mbPerSOf(diskRow(RowProduce, tt.acks)), *rep.Results[0].RatioToBaseline, 1e-9)
			var out bytes.Buffer
			require.NoError(t, rep.WriteText(&out))
			require.Contains(t, out.String(), "x disk  x loopback")
			for _, want := range tt.want {
				require.Contains(t, out.String(), want)
			}
		})
	}
	var out bytes.Buffer
	require.NoError(t, (&Report{Config: Config{Topic: "t"}, Results: []Result{{Workload: RowProduce}}}).WriteText(&out))
	require.NotContains(t, out.String(), "x disk", "no ratios, no note")
}

func TestLatencyTicks(t *testing.T) {
	// labels is the labelled ticks as "value=label", ascending.
	labels := func(ticks []plot.Tick) []string {
		var out []string
		slices.SortFunc(ticks, func(a, b plot.Tick) int { return cmp.Compare(a.Value, b.Value) })
		for _, tick := range ticks {
			if !tick.IsMinor() {
				out = append(out, fmt.Sprintf("%g=%s", tick.Value, tick.Label))
			}
		}
		return out
	}
	tests := []struct {
		name       string
		p99        []float64
		lo, hi     float64
		want       []string
		wantMinors int
	}{
		{
			"every decade and the p99",
			[]float64{45.3}, 0.01, 100,
			[]string{"0.01=0.01", "0.1=0.1", "1=1", "10=10", "45.3=p99 45.3", "100=100"},
			4 * 8, // 2..9 of each decade
		},
		{
			"decades below 1 ms, range not on decades",
			[]float64{0.05123}, 0.003, 0.8,
			[]string{"0.01=0.01", "0.05123=p99 0.0512", "0.1=0.1"},
			7 + 8 + 7, // 0.003..0.009, 0.02..0.09, 0.2..0.8
		},
		{
			"every decade of a wide range",
			nil, 0.001, 10_000,
			[]string{"0.001=0.001", "0.01=0.01", "0.1=0.1", "1=1", "10=10", "100=100", "1000=1000", "10000=10000"},
			7 * 8,
		},
		{
			"a decade gives its label up to a p99 next to it",
			[]float64{9.6}, 0.1, 100,
			[]string{"0.1=0.1", "1=1", "9.6=p99 9.6", "100=100"},
			3*8 + 1, // and 10, unlabelled
		},
		{
			"two p99s next to each other share a label",
			[]float64{4.31, 4.12}, 0.1, 100,
			[]string{"0.1=0.1", "1=1", "4.12=p99 4.12 / 4.31", "10=10", "100=100"},
			3 * 8,
		},
		{
			"two p99s apart each have one",
			[]float64{2.5, 4567.8}, 0.1, 10_000,
			[]string{"0.1=0.1", "1=1", "2.5=p99 2.5", "10=10", "100=100", "1000=1000", "4567.8=p99 4570", "10000=10000"},
			5 * 8,
		},
		{"a p99 out of range is left out", []float64{500}, 0.1, 10, []string{"0.1=0.1", "1=1", "10=10"}, 2 * 8},
		{"no range", []float64{1}, 0, 10, nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ticks := latencyTicks{p99: tt.p99}.Ticks(tt.lo, tt.hi)
			require.Equal(t, tt.want, labels(ticks))
			minors := 0
			for _, tick := range ticks {
				require.GreaterOrEqual(t, tick.Value, tt.lo)
				require.LessOrEqual(t, tick.Value, tt.hi)
				if tick.IsMinor() {
					minors++
				}
			}
			require.Equal(t, tt.wantMinors, minors)
		})
	}
}

// The latency plot's y axis runs over whole decades and carries the
// latency ticks with the p99 of each distribution drawn.
func TestLatencyPlotAxis(t *testing.T) {
	ack, e2e := NewLatencies(), NewLatencies()
	for i := 1; i <= 1000; i++ {
		ack.Record(time.Duration(i) * 30 * time.Microsecond) // 0.03 .. 30 ms
		e2e.Record(time.Duration(i) * 50 * time.Microsecond)
	}
	p, err := latencyPlot(&Report{Ack: ack, EndToEnd: e2e})
	require.NoError(t, err)
	require.InDelta(t, 0.001, p.Y.Min, 1e-12, "the decade at or below a tenth of the lowest")
	require.InDelta(t, 100.0, p.Y.Max, 1e-9, "the decade at or above the highest")
	ticks, ok := p.Y.Tick.Marker.(latencyTicks)
	require.True(t, ok)
	require.Equal(t, []float64{ack.QuantileMs(0.99), e2e.QuantileMs(0.99)}, ticks.p99)
}
