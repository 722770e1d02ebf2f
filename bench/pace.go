package bench

import (
	"math"
	"time"
)

// minPause is the shortest pause a producer takes when ahead of its rate:
// shorter debts accumulate in the bucket instead of each costing a sleep.
const minPause = time.Millisecond

// tokenBucket paces one producer at rate records per second with a burst of
// 10 ms worth of records (at least one). Reserve hands out tokens on credit,
// as golang.org/x/time/rate does, and says how long the caller is ahead of
// the rate; callers pause only once that reaches minPause, so a fast rate
// costs one sleep per millisecond, not one per record. Time is passed in, so
// the bucket is a pure value. Not safe for concurrent use: one per producer.
type tokenBucket struct {
	rate   float64 // tokens per second
	burst  float64
	tokens float64
	last   time.Time
}

func newTokenBucket(rate float64, now time.Time) *tokenBucket {
	burst := math.Max(1, rate/100)
	return &tokenBucket{rate: rate, burst: burst, tokens: 1, last: now}
}

// reserve takes one token at now and returns how long until the bucket is
// out of debt (0 when a token was there).
func (b *tokenBucket) reserve(now time.Time) time.Duration {
	if elapsed := now.Sub(b.last).Seconds(); elapsed > 0 {
		b.tokens = math.Min(b.burst, b.tokens+elapsed*b.rate)
		b.last = now
	}
	b.tokens--
	if b.tokens >= 0 {
		return 0
	}
	return time.Duration(-b.tokens / b.rate * float64(time.Second))
}

func pow10(x float64) float64 { return math.Pow(10, x) }
