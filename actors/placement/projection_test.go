package placement

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestProjection(t *testing.T) {
	const day = 86_400
	tests := []struct {
		name           string
		bytes          int64
		rate           float64
		retentionBytes int64
		retentionMs    int64
		want           int64
	}{
		{"unlimited grows by the horizon", gib, 1000, -1, -1, gib + 1000*day},
		{"unlimited capped by retention.bytes", gib, 1 << 20, 2 * gib, -1, 2 * gib},
		{"unlimited never below current", 3 * gib, 1 << 20, 2 * gib, -1, 3 * gib},
		{"time-bounded steady state", 100 * mib, float64(mib), -1, 3_600_000, 3600 * mib},
		{"time-bounded never below current", 10 * gib, 1, -1, 3_600_000, 10 * gib},
		{"time-bounded ignores current when below", 5 * gib, float64(mib), -1, 7 * day * 1000, 7 * day * mib},
		{"bytes-bounded", 0, float64(mib), gib, 7 * day * 1000, gib},
		{"retention.bytes zero", 0, float64(mib), 0, -1, 0},
		{"zero rate unlimited", 5 * gib, 0, -1, -1, 5 * gib},
		{"zero rate time-bounded", 5 * gib, 0, -1, 3_600_000, 5 * gib},
		{"zero rate bytes-bounded", 5 * gib, 0, gib, 3_600_000, 5 * gib},
		{"retention.ms zero", 5 * gib, float64(gib), -1, 0, 5 * gib},
		{"negative rate is zero", gib, -5, -1, -1, gib},
		{"NaN rate is zero", gib, math.NaN(), -1, 3_600_000, gib},
		{"infinite rate is zero", gib, math.Inf(1), -1, -1, gib},
		{"negative bytes are zero", -7, 1, -1, 1000, 1},
		{"saturates", math.MaxInt64 - 10, 1e18, -1, -1, math.MaxInt64},
		{"saturates time-bounded", 0, 1e300, -1, 1000, math.MaxInt64},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, Projection(tt.bytes, tt.rate, tt.retentionBytes, tt.retentionMs))
		})
	}
}
