package partition

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestFetchThrottleMaxBytes(t *testing.T) {
	for _, c := range []struct {
		rate int64
		want int32
	}{
		{0, replicaPartitionMaxBytes},
		{10 << 10, minThrottledChunkBytes},
		{1 << 20, 1 << 20 / 10},
		{100 << 20, replicaPartitionMaxBytes},
	} {
		th := fetchThrottle{rate: c.rate}
		require.Equal(t, c.want, th.maxBytes(), "rate %d", c.rate)
	}
}

func TestFetchThrottlePaces(t *testing.T) {
	t0 := time.Unix(1000, 0)
	const rate = 1 << 20
	for _, c := range []struct {
		name  string
		takes []time.Duration // when each take of rate/10 bytes comes, from t0
		due   time.Duration   // when the next fetch may go, from t0
	}{
		{"one", []time.Duration{0}, 100 * time.Millisecond},
		{"back to back", []time.Duration{0, 0}, 200 * time.Millisecond},
		{"after the due time", []time.Duration{0, 150 * time.Millisecond}, 250 * time.Millisecond},
		{"idle time gives no burst", []time.Duration{0, 10 * time.Second}, 10*time.Second + 100*time.Millisecond},
	} {
		t.Run(c.name, func(t *testing.T) {
			th := fetchThrottle{rate: rate}
			require.True(t, th.ready(t0))
			for _, at := range c.takes {
				th.took(rate/10, t0.Add(at))
			}
			require.False(t, th.ready(t0.Add(c.due-time.Millisecond)))
			require.True(t, th.ready(t0.Add(c.due)))
		})
	}

	unlimited := fetchThrottle{}
	unlimited.took(1<<30, t0)
	require.True(t, unlimited.ready(t0), "0 is unlimited")
	empty := fetchThrottle{rate: rate}
	empty.took(0, t0)
	require.True(t, empty.ready(t0), "an answer with nothing costs nothing")
}

// Fetching whenever the throttle allows, as much as it allows, brings at
// most the rate over any stretch, plus one fetch.
func TestFetchThrottleAverage(t *testing.T) {
	t0 := time.Unix(1000, 0)
	for _, rate := range []int64{10 << 10, 1 << 20, 64 << 20} {
		th := fetchThrottle{rate: rate}
		var fetched int64
		const span = 10 * time.Second
		for now := t0; now.Before(t0.Add(span)); now = now.Add(time.Millisecond) {
			if th.ready(now) {
				th.took(int(th.maxBytes()), now)
				fetched += int64(th.maxBytes())
			}
		}
		limit := rate*int64(span/time.Second) + int64(th.maxBytes())
		require.LessOrEqual(t, fetched, limit, "rate %d", rate)
		require.Greater(t, fetched, limit*8/10, "rate %d: the throttle lets the rate through", rate)
	}
}
