package node

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/depot-dev/depot/actors/actortest"
	"github.com/depot-dev/depot/messages"
)

// depotSeries returns the node's /metrics samples named depot_*, by series
// (name and labels).
func depotSeries(t *testing.T, n *Node) map[string]float64 {
	t.Helper()
	res, err := http.Get("http://" + n.HTTPAddress() + "/metrics")
	require.NoError(t, err)
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, res.StatusCode)
	series := map[string]float64{}
	for _, line := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(line, "depot_") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		require.NoError(t, err, line)
		series[line[:i]] = v
	}
	return series
}

// The node's metrics are per node and per log directory, never per
// partition: a topic of 300 partitions adds no series. The file cache's
// are among them.
func TestMetricsDoNotGrowWithPartitions(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.MaxOpenFiles = 100
	n := startNode(t, cfg)
	before := depotSeries(t, n)
	require.Equal(t, 100.0, before["depot_segment_files_open_limit"])

	created := request[*messages.CreateTopicResponse](t, n, n.Metadata(), &messages.CreateTopicRequest{Name: "wide", Partitions: 300})
	require.Equal(t, messages.ErrorCode_NONE, created.Error, created.ErrorMessage)
	for p := int32(0); p < 300; p += 7 {
		pid := partitionPID(t, n, "wide", p)
		resp := request[*messages.ProduceResponse](t, n, pid, &messages.ProduceRequest{Topic: "wide", Partition: p, Acks: -1, Records: actortest.Batch(t, "v")})
		require.Equal(t, messages.ErrorCode_NONE, resp.Error, resp.ErrorMessage)
	}
	after := depotSeries(t, n)
	names := func(m map[string]float64) []string {
		var out []string
		for k := range m {
			out = append(out, k)
		}
		return out
	}
	require.ElementsMatch(t, names(before), names(after), "no series per partition")
	require.Equal(t, 900.0, after["depot_segment_files_handles"], "three files of each partition's segment")
	require.LessOrEqual(t, after["depot_segment_files_open"], 100.0)
	require.Greater(t, after["depot_segment_files_evictions_total"], 0.0)
	require.Equal(t, float64(n.OpenFiles().Capacity), after["depot_segment_files_open_limit"])
}
