package cli

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/depot-dev/depot/messages"
)

// Before its leader is asked, a partition's high watermark is unknown
// (-1), and its replicas and ISR are lists even when the metadata has none;
// the leader's answer gives the high watermark and the leader's replica
// dir, and no other replica's.
func TestDescribePartition(t *testing.T) {
	p := &messages.PartitionMetadata{
		Partition: 2, Leader: 1, LeaderEpoch: 4, Replicas: []int32{1, 2},
		ReplicaDirs: []*messages.ReplicaDir{{Node: 1, LogEndOffset: -1}, {Node: 2, LogDir: "/b", LogEndOffset: -1}},
	}
	d := describePartition(p)
	require.Equal(t, int64(-1), d.HighWatermark)
	require.Equal(t, []int32{}, d.ISR)
	require.Equal(t, int32(4), d.LeaderEpoch)
	out, err := json.Marshal(describePartition(&messages.PartitionMetadata{Leader: -1}))
	require.NoError(t, err)
	require.Contains(t, string(out), `"replicas":[],"isr":[]`)
	require.Contains(t, string(out), `"high_watermark":-1`)

	st := &messages.PartitionStatusResponse{LogDir: "/a", LogStartOffset: 3, HighWatermark: 7, LogEndOffset: 9, SizeBytes: 100, Segments: 2}
	got := d.withStatus(st)
	require.Equal(t, int64(7), got.HighWatermark)
	require.Equal(t, int64(9), got.LogEndOffset)
	require.Equal(t, []replicaDirs{{Node: 1, LogDir: "/a", LogEndOffset: 9}, {Node: 2, LogDir: "/b", LogEndOffset: -1}}, got.ReplicaDirs)
	require.Equal(t, int64(-1), d.ReplicaDirs[0].LogEndOffset, "the description before is left as it was")
}

// describe gives each partition's high watermark, at its log end once the
// records are in, and its ISR and leader epoch.
func TestDescribeHighWatermark(t *testing.T) {
	n := startTestNode(t)
	b := "--brokers=" + n.Address()
	_, errOut, err := depot(t, "", "topic", "create", "orders", "-p", "2", b)
	require.NoError(t, err, errOut)
	_, errOut, err = depot(t, "a\nb\nc\n", "produce", "orders", "--partition", "1", b)
	require.NoError(t, err, errOut)
	out, errOut, err := depot(t, "", "topic", "describe", "orders", "-o", "json", b)
	require.NoError(t, err, errOut)
	var described struct {
		Partitions []struct {
			Partition     int32   `json:"partition"`
			ISR           []int32 `json:"isr"`
			LeaderEpoch   *int32  `json:"leader_epoch"`
			HighWatermark *int64  `json:"high_watermark"`
			LogEndOffset  int64   `json:"log_end_offset"`
		} `json:"partitions"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &described), out)
	require.Len(t, described.Partitions, 2)
	for _, p := range described.Partitions {
		require.Equal(t, []int32{1}, p.ISR)
		require.NotNil(t, p.LeaderEpoch)
		require.NotNil(t, p.HighWatermark)
		require.Equal(t, p.LogEndOffset, *p.HighWatermark)
		require.Equal(t, int64(3*p.Partition), *p.HighWatermark)
	}
	out, errOut, err = depot(t, "", "topic", "describe", "orders", b)
	require.NoError(t, err, errOut)
	require.Regexp(t, `PARTITION +LEADER +REPLICAS +ISR +EPOCH +LOG-DIR +LOG-START +HIGH-WATERMARK +LOG-END +BYTES +SEGMENTS\n`, out)
	require.Regexp(t, `\n1 +1 +1 +1 +\d+ +\S+ +0 +3 +3 +\d+ +1\n`, out)
}
