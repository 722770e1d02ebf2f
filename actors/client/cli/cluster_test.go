package cli

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// A single node is a cluster of one: cluster info names it online, a voter
// and the controller; describe gives each partition's replicas, ISR and
// leader epoch; a replication factor beyond what the cluster supports is
// refused; and disks --node takes a node id.
func TestClusterCommands(t *testing.T) {
	n := startTestNode(t)
	b := "--brokers=" + n.Address()

	out, errOut, err := depot(t, "", "cluster", "info", "-o", "json", b)
	require.NoError(t, err, errOut)
	var info struct {
		ClusterID        string `json:"cluster_id"`
		ControllerLeader int32  `json:"controller_leader"`
		Nodes            []struct {
			ID           int32   `json:"id"`
			Address      string  `json:"address"`
			KafkaAddress *string `json:"kafka_address"`
			Rack         *string `json:"rack"`
			State        string  `json:"state"`
			Voter        bool    `json:"voter"`
		} `json:"nodes"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &info), out)
	require.Len(t, info.ClusterID, 22, "a UUID in base64url, as Kafka's")
	require.Equal(t, int32(1), info.ControllerLeader)
	require.Len(t, info.Nodes, 1)
	require.Equal(t, int32(1), info.Nodes[0].ID)
	require.Equal(t, n.Address(), info.Nodes[0].Address)
	require.Equal(t, "online", info.Nodes[0].State)
	require.True(t, info.Nodes[0].Voter)
	require.NotNil(t, info.Nodes[0].KafkaAddress)
	require.NotNil(t, info.Nodes[0].Rack)

	out, errOut, err = depot(t, "", "cluster", "info", b)
	require.NoError(t, err, errOut)
	require.Contains(t, out, "CONTROLLER  1 ")
	require.Contains(t, out, "online")

	_, errOut, err = depot(t, "", "topic", "create", "orders", "-p", "2", "-r", "3", b)
	require.ErrorContains(t, err, "replication factor 3")
	_, errOut, err = depot(t, "", "topic", "create", "orders", "-p", "2", "-r", "1", b)
	require.NoError(t, err, errOut)

	out, errOut, err = depot(t, "", "topic", "describe", "orders", "-o", "json", b)
	require.NoError(t, err, errOut)
	var described struct {
		TopicID    string `json:"topic_id"`
		Partitions []struct {
			Partition   int32   `json:"partition"`
			Leader      int32   `json:"leader"`
			Replicas    []int32 `json:"replicas"`
			ISR         []int32 `json:"isr"`
			LeaderEpoch *int32  `json:"leader_epoch"`
			LogDir      string  `json:"log_dir"`
			ReplicaDirs []struct {
				Node         int32  `json:"node"`
				LogDir       string `json:"log_dir"`
				LogEndOffset int64  `json:"log_end_offset"`
			} `json:"replica_dirs"`
		} `json:"partitions"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &described), out)
	require.Len(t, described.TopicID, 36)
	require.Len(t, described.Partitions, 2)
	for _, p := range described.Partitions {
		require.Equal(t, int32(1), p.Leader)
		require.Equal(t, []int32{1}, p.Replicas)
		require.Equal(t, []int32{1}, p.ISR)
		require.NotNil(t, p.LeaderEpoch)
		require.Len(t, p.ReplicaDirs, 1)
		require.Equal(t, int32(1), p.ReplicaDirs[0].Node)
		require.Equal(t, p.LogDir, p.ReplicaDirs[0].LogDir)
		require.NotEmpty(t, p.LogDir)
		require.Zero(t, p.ReplicaDirs[0].LogEndOffset)
	}

	out, errOut, err = depot(t, "", "disks", "--node", "1", "-o", "json", b)
	require.NoError(t, err, errOut)
	var dirs []map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &dirs))
	require.Len(t, dirs, 2)
	_, _, err = depot(t, "", "disks", "--node", "9", b)
	require.ErrorContains(t, err, "node 9 is not in the cluster")
}
