package placement

import (
	"math"
	"time"
)

// ProjectionHorizon is how far ahead Projection looks for a partition whose
// retention is not bounded in time: 24 hours of writes at the current rate.
const ProjectionHorizon = 24 * time.Hour

// Projection estimates the bytes a partition will hold once its growth meets
// its retention, from its current size, its write rate in bytes per second
// and its topic's retention.bytes and retention.ms (Kafka's meanings: -1, or
// any negative value, for unlimited).
//
//   - retentionMs > 0: the steady state, rate * retention.ms, capped by
//     retention.bytes when that is >= 0.
//   - retentionMs == 0: segments are deleted as soon as they roll, so the
//     partition is not expected to grow: the current size.
//   - retentionMs < 0 (unlimited): the current size plus ProjectionHorizon
//     of writes, capped by retention.bytes when that is >= 0.
//
// The result is never below the current size (retention deletes whole
// segments, so what is there now is a floor until the next roll) and
// saturates at the maximum int64. A negative, NaN or infinite rate counts as
// 0 (an infinite rate is taken as unknown, not as unbounded growth), a
// negative size as 0. Retention trims by whole segments, so a partition
// briefly holds up to one segment more than retention.bytes; that excess is
// not projected.
func Projection(bytes int64, writeBytesPerS float64, retentionBytes int64, retentionMs int64) int64 {
	bytes = max(bytes, 0)
	rate := writeBytesPerS
	if !(rate > 0) || math.IsInf(rate, 1) {
		rate = 0
	}
	var grown float64
	switch {
	case retentionMs > 0:
		grown = rate * float64(retentionMs) / 1000
	case retentionMs == 0:
		return bytes
	default:
		grown = float64(bytes) + rate*ProjectionHorizon.Seconds()
	}
	if retentionBytes >= 0 {
		grown = min(grown, float64(retentionBytes))
	}
	if grown >= math.MaxInt64 {
		return math.MaxInt64
	}
	return max(bytes, int64(grown))
}
