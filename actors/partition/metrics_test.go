package partition

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/depot-dev/depot/messages"
)

func TestMetricsCountISRChanges(t *testing.T) {
	for _, tc := range []struct {
		name             string
		before, after    []int32
		shrinks, expands float64
	}{
		{"unchanged", []int32{1, 2, 3}, []int32{3, 1, 2}, 0, 0},
		{"one leaves", []int32{1, 2, 3}, []int32{1, 3}, 1, 0},
		{"two leave", []int32{1, 2, 3}, []int32{1}, 2, 0},
		{"one joins", []int32{1}, []int32{1, 2}, 0, 1},
		{"one for another", []int32{1, 2}, []int32{1, 3}, 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := NewMetrics(prometheus.NewRegistry())
			m.isrChanged(tc.before, tc.after)
			require.Equal(t, tc.shrinks, testutil.ToFloat64(m.isrShrinks))
			require.Equal(t, tc.expands, testutil.ToFloat64(m.isrExpands))
		})
	}
	var none *Metrics
	none.isrChanged([]int32{1, 2}, []int32{1}) // records nothing, and does not panic
}

// TestMetricsOfAnAcksAllProduce: an acks=all produce records its fsync
// and its wait; an acks=1 produce records neither.
func TestMetricsOfAnAcksAllProduce(t *testing.T) {
	f := newMoveFixture(t, 1<<20, nil)
	f.stop(t)
	f.metrics = NewMetrics(prometheus.NewRegistry())
	f.start(t, f.dirs[0], 0)

	resp := moveRequest[*messages.ProduceResponse](t, f, &messages.ProduceRequest{Topic: "orders", Acks: 1, Records: f.batch(t, "a")})
	require.Equal(t, messages.ErrorCode_NONE, resp.Error, resp.ErrorMessage)
	require.Zero(t, histogramCount(t, f.metrics.flushSeconds))
	require.Zero(t, histogramCount(t, f.metrics.ackWaitSeconds))

	resp = moveRequest[*messages.ProduceResponse](t, f, &messages.ProduceRequest{Topic: "orders", Acks: -1, Records: f.batch(t, "b")})
	require.Equal(t, messages.ErrorCode_NONE, resp.Error, resp.ErrorMessage)
	require.Equal(t, 1, histogramCount(t, f.metrics.ackWaitSeconds))
	require.GreaterOrEqual(t, histogramCount(t, f.metrics.flushSeconds), 1)
}

// histogramCount is the number of observations of h.
func histogramCount(t *testing.T, h prometheus.Histogram) int {
	t.Helper()
	ch := make(chan prometheus.Metric, 1)
	h.Collect(ch)
	var m dto.Metric
	require.NoError(t, (<-ch).Write(&m))
	return int(m.GetHistogram().GetSampleCount())
}
