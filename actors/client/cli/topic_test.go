package cli

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/depot-dev/depot/messages"
	"github.com/depot-dev/depot/node"
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

// The partition lists of topic list, as kafka-topics.sh --describe gives
// them: under-replicated (ISR smaller than replicas), under min ISR (ISR
// smaller than the topic's min.insync.replicas, 1 unless it says) and
// unavailable (no leader), by topic then partition.
func TestListPartitions(t *testing.T) {
	topics := []*messages.TopicMetadata{
		{Name: "b", Configs: map[string]string{"min.insync.replicas": "2"}, Partitions: []*messages.PartitionMetadata{
			{Partition: 1, Leader: 2, Replicas: []int32{1, 2, 3}, Isr: []int32{2}},
			{Partition: 0, Leader: 1, Replicas: []int32{1, 2, 3}, Isr: []int32{1, 2, 3}},
			{Partition: 2, Leader: 3, Replicas: []int32{3, 1, 2}, Isr: []int32{3, 1}},
		}},
		{Name: "a", Partitions: []*messages.PartitionMetadata{
			{Partition: 0, Leader: -1, Replicas: []int32{1, 2}, Isr: []int32{1}, Error: messages.ErrorCode_LEADER_NOT_AVAILABLE},
			{Partition: 1, Leader: 2, Replicas: []int32{2, 3}, Isr: []int32{2, 3}},
		}},
		{Name: "c", Configs: map[string]string{"min.insync.replicas": "many"}, Partitions: []*messages.PartitionMetadata{
			{Partition: 0, Leader: -1, Replicas: []int32{1}},
		}},
		{Name: "gone", Error: messages.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION},
	}
	type tp struct {
		topic     string
		partition int32
	}
	names := func(rows []partitionListing) []tp {
		out := []tp{}
		for _, r := range rows {
			out = append(out, tp{r.Topic, r.Partition})
		}
		return out
	}
	require.Equal(t, []tp{{"a", 0}, {"b", 1}, {"b", 2}, {"c", 0}}, names(listPartitions(topics, isUnderReplicated)))
	require.Equal(t, []tp{{"b", 1}, {"c", 0}}, names(listPartitions(topics, isUnderMinISR)), "b needs 2, c 1 (unreadable), a 1")
	require.Equal(t, []tp{{"a", 0}, {"c", 0}}, names(listPartitions(topics, isUnavailable)))
	require.Equal(t, []partitionListing{{Topic: "c", Partition: 0, Leader: -1, Replicas: []int32{1}, ISR: []int32{}}}, listPartitions(topics[2:], isUnavailable))
	require.Equal(t, []partitionListing{}, listPartitions(topics[:1], isUnavailable))
}

func TestPrintPartitionListings(t *testing.T) {
	rows := []partitionListing{
		{Topic: "orders", Partition: 0, Leader: -1, Replicas: []int32{1, 2, 3}, ISR: []int32{}},
		{Topic: "orders", Partition: 11, Leader: 2, Replicas: []int32{2, 3, 1}, ISR: []int32{2}},
	}
	var out bytes.Buffer
	g := &globals{stdout: &out, output: "text"}
	require.NoError(t, g.printPartitionListings(rows))
	require.Equal(t, ""+
		"TOPIC   PARTITION  LEADER  REPLICAS  ISR\n"+
		"orders  0          none    1,2,3     -\n"+
		"orders  11         2       2,3,1     2\n", out.String())

	out.Reset()
	g.output = "json"
	require.NoError(t, g.printPartitionListings(rows))
	var got []map[string]any
	require.NoError(t, json.Unmarshal(out.Bytes(), &got))
	require.Equal(t, []map[string]any{
		{"topic": "orders", "partition": 0.0, "leader": -1.0, "replicas": []any{1.0, 2.0, 3.0}, "isr": []any{}},
		{"topic": "orders", "partition": 11.0, "leader": 2.0, "replicas": []any{2.0, 3.0, 1.0}, "isr": []any{2.0}},
	}, got)
}

// Against a node: its one-replica partitions are in sync and led, so each
// list is empty, a table with its header alone or [] in JSON; two lists at
// once are refused before any node is asked; describe gives each
// partition's high watermark, at its log end once the records are in.
func TestTopicPartitionStates(t *testing.T) {
	n := startTestNode(t)
	b := "--brokers=" + n.Address()
	_, errOut, err := depot(t, "", "topic", "create", "orders", "-p", "2", b)
	require.NoError(t, err, errOut)
	_, errOut, err = depot(t, "a\nb\nc\n", "produce", "orders", "--partition", "1", b)
	require.NoError(t, err, errOut)

	for _, flag := range []string{"--under-replicated", "--under-min-isr", "--unavailable"} {
		out, errOut, err := depot(t, "", "topic", "list", flag, b)
		require.NoError(t, err, errOut)
		require.Equal(t, "TOPIC  PARTITION  LEADER  REPLICAS  ISR\n", out, flag)
		out, errOut, err = depot(t, "", "topic", "list", flag, "-o", "json", b)
		require.NoError(t, err, errOut)
		require.Equal(t, "[]\n", out, flag)
	}
	_, _, err = depot(t, "", "topic", "list", "--under-replicated", "--unavailable", "--brokers=127.0.0.1:1")
	require.True(t, node.IsUsage(err), "%v", err)
	require.EqualError(t, err, "--under-replicated, --under-min-isr and --unavailable: give one")

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
