package bench

import (
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Latency histogram bounds: 1 us to 60 s at 3 significant digits.
const (
	minLatencyMicros = 1
	maxLatencyMicros = 60_000_000
	latencyDigits    = 3
)

// Latencies is an HDR histogram of durations in microseconds. Safe for
// concurrent use.
type Latencies struct {
	mu sync.Mutex
	h  *hdrhistogram.Histogram
}

// NewLatencies returns an empty histogram of 1 us .. 60 s, 3 significant
// digits.
func NewLatencies() *Latencies {
	return &Latencies{h: hdrhistogram.New(minLatencyMicros, maxLatencyMicros, latencyDigits)}
}

// Record adds d, clamped to the histogram's range.
func (l *Latencies) Record(d time.Duration) {
	us := min(max(d.Microseconds(), minLatencyMicros), maxLatencyMicros)
	l.mu.Lock()
	_ = l.h.RecordValue(us) // in range by the clamp
	l.mu.Unlock()
}

// Merge adds every value of o.
func (l *Latencies) Merge(o *Latencies) {
	o.mu.Lock()
	snap := hdrhistogram.Import(o.h.Export())
	o.mu.Unlock()
	l.mu.Lock()
	l.h.Merge(snap)
	l.mu.Unlock()
}

// Count is the number of values recorded.
func (l *Latencies) Count() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.h.TotalCount()
}

// QuantileMs is the value at quantile q (0..1) in milliseconds.
func (l *Latencies) QuantileMs(q float64) float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return float64(l.h.ValueAtQuantile(q*100)) / 1000
}

// MaxMs is the largest value in milliseconds.
func (l *Latencies) MaxMs() float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return float64(l.h.Max()) / 1000
}

// PercentilePoint is one point of a percentile plot: X is 1/(1-q).
type PercentilePoint struct {
	Quantile float64
	X        float64
	Ms       float64
}

// Percentiles returns the distribution as HDR percentile plots draw it: at
// quantiles q with 1/(1-q) spaced evenly on a log scale, up to the
// resolution the count allows (1/(1-q) at most the count), then the max.
func (l *Latencies) Percentiles() []PercentilePoint {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := l.h.TotalCount()
	if n == 0 {
		return nil
	}
	var out []PercentilePoint
	const perDecade = 20
	for i := 0; ; i++ {
		x := pow10(float64(i) / perDecade)
		if x > float64(n) || x > 1e7 {
			break
		}
		q := 1 - 1/x
		v := l.h.ValueAtQuantile(q * 100)
		if i == 0 {
			v = l.h.Min()
		}
		out = append(out, PercentilePoint{Quantile: q, X: x, Ms: float64(v) / 1000})
	}
	last := max(float64(n), 1)
	out = append(out, PercentilePoint{Quantile: 1, X: last, Ms: float64(l.h.Max()) / 1000})
	return out
}
