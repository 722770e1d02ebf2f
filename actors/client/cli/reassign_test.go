package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"

	"github.com/depot-dev/depot/actors/actortest"
	"github.com/depot-dev/depot/actors/client"
	"github.com/depot-dev/depot/node"
)

// startTwoNodes starts a node that is its own controller and a second that
// joins it, each with the throttle given for the replicas a reassignment
// adds, and waits until both are registered.
func startTwoNodes(t *testing.T, throttle int64) (first, second *node.Node) {
	t.Helper()
	quorum := node.QuorumSettings{TickInterval: 20 * time.Millisecond, HeartbeatInterval: 100 * time.Millisecond, SessionTimeout: time.Second}
	cfg := func(id int32) node.Config {
		c := node.Config{NodeID: id, DataDir: t.TempDir(), Listen: "127.0.0.1:0", Quorum: quorum, Logger: actortest.Logger(t, logrus.WarnLevel)}
		c.Balance.ThrottleBytesPerS = throttle
		return c
	}
	first, err := node.Start(cfg(1))
	require.NoError(t, err)
	t.Cleanup(func() { _ = first.Stop() })
	c2 := cfg(2)
	c2.Controllers = []node.Voter{{ID: 1, Address: first.Address()}}
	second, err = node.Start(c2)
	require.NoError(t, err)
	t.Cleanup(func() { _ = second.Stop() })
	for _, n := range []*node.Node{first, second} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		require.NoError(t, n.WaitRegistered(ctx))
		cancel()
	}
	return first, second
}

func TestReassignCommand(t *testing.T) {
	first, second := startTwoNodes(t, 64<<10)
	b := "--brokers=" + first.Address() + "," + second.Address()

	for _, args := range [][]string{
		{"topic", "reassign", "--partition", "0", "--replicas", "1"},
		{"topic", "reassign", "moving", "--replicas", "1"},
		{"topic", "reassign", "moving", "--partition", "0"},
		{"topic", "reassign", "moving", "--partition", "0", "--replicas", "1", "--cancel"},
		{"topic", "reassign", "moving", "--status", "--replicas", "1"},
	} {
		_, _, err := depot(t, "", append(args, b)...)
		require.True(t, node.IsUsage(err), "%v: %v", args, err)
	}

	_, errOut, err := depot(t, "", "topic", "create", "moving", b)
	require.NoError(t, err, errOut)
	out, errOut, err := depot(t, "", "topic", "describe", "moving", "-o", "json", b)
	require.NoError(t, err, errOut)
	var described struct {
		Partitions []struct {
			Replicas []int32 `json:"replicas"`
			Adding   []int32 `json:"adding_replicas"`
		} `json:"partitions"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &described), out)
	from := described.Partitions[0].Replicas[0]
	to := 3 - from
	// 200 KB in small batches: the new replica takes about three seconds
	// to catch up, at the pace of the throttle.
	cl, err := client.New(client.Brokers(first.Address()), client.Logger(quietLogger()))
	require.NoError(t, err)
	defer cl.Close()
	p, err := cl.NewProducer(client.BatchBytes(4 << 10))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for range 200 {
		p.Produce(ctx, &client.Record{Topic: "moving", Value: []byte(strings.Repeat("v", 1000))}, nil)
	}
	require.NoError(t, p.Flush(ctx))
	p.Close()

	_, _, err = depot(t, "", "topic", "reassign", "moving", "--partition", "0", "--replicas", "9", b)
	require.EqualError(t, err, "moving-0: the target [9] names node 9, which is not registered")
	_, _, err = depot(t, "", "topic", "reassign", "moving", "--partition", "0", "--cancel", b)
	require.EqualError(t, err, "moving-0: no reassignment in progress")
	out, errOut, err = depot(t, "", "topic", "reassign", "--status", b)
	require.NoError(t, err, errOut)
	require.Equal(t, "no reassignment in progress\n", out)
	out, errOut, err = depot(t, "", "topic", "reassign", "--status", "moving", "-o", "json", b)
	require.NoError(t, err, errOut)
	require.Equal(t, "[]\n", out)

	out, errOut, err = depot(t, "", "topic", "reassign", "moving", "--partition", "0", "--replicas", fmt.Sprint(to), b)
	require.NoError(t, err, errOut)
	require.Equal(t, fmt.Sprintf("reassigning moving-0: adding %d, removing %d; replicas %d,%d until the replicas added are in sync\n", to, from, to, from), out)

	// The status shows the new replica on its way, at 64 KiB/s.
	require.Eventually(t, func() bool {
		out, _, err = depot(t, "", "topic", "reassign", "--status", b)
		return err == nil && strings.Contains(out, fmt.Sprintf("%d: ", to)) && strings.Contains(out, "/200 (")
	}, 10*time.Second, 20*time.Millisecond, "status: %s", out)
	require.Regexp(t, fmt.Sprintf(`(?m)^moving\s+0\s+%d,%d\s+%d\s+%d\s+%d\s+%d\s+%d: \d+/200 \(\d+%%\)$`, to, from, to, to, from, from, to), out)
	out, errOut, err = depot(t, "", "topic", "reassign", "--status", "-o", "json", b)
	require.NoError(t, err, errOut)
	var status []struct {
		Topic    string  `json:"topic"`
		Target   []int32 `json:"target"`
		Adding   []int32 `json:"adding_replicas"`
		Removing []int32 `json:"removing_replicas"`
		LeaderLE int64   `json:"leader_log_end_offset"`
		Progress []struct {
			Node   int32 `json:"node"`
			LogEnd int64 `json:"log_end_offset"`
			InSync bool  `json:"in_sync"`
		} `json:"progress"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &status), out)
	require.Len(t, status, 1)
	require.Equal(t, []int32{to}, status[0].Target)
	require.Equal(t, []int32{to}, status[0].Adding)
	require.Equal(t, []int32{from}, status[0].Removing)
	require.Equal(t, int64(200), status[0].LeaderLE)
	require.Len(t, status[0].Progress, 1)
	require.Equal(t, to, status[0].Progress[0].Node)
	require.Less(t, status[0].Progress[0].LogEnd, int64(200))
	require.False(t, status[0].Progress[0].InSync)

	out, errOut, err = depot(t, "", "topic", "reassign", "moving", "--partition", "0", "--cancel", "-o", "json", b)
	require.NoError(t, err, errOut)
	require.JSONEq(t, fmt.Sprintf(`{"topic": "moving", "partition": 0, "state": "cancelled", "replicas": [%d], "adding_replicas": [], "removing_replicas": []}`, from), out)
	out, _, err = depot(t, "", "topic", "reassign", "--status", b)
	require.NoError(t, err)
	require.Equal(t, "no reassignment in progress\n", out)

	// Again, to both: it completes once the new replica is in sync.
	out, errOut, err = depot(t, "", "topic", "reassign", "moving", "--partition", "0", "--replicas", fmt.Sprintf("%d,%d", from, to), "-o", "json", b)
	require.NoError(t, err, errOut)
	require.JSONEq(t, fmt.Sprintf(`{"topic": "moving", "partition": 0, "state": "reassigning", "replicas": [%d, %d], "adding_replicas": [%d], "removing_replicas": []}`, from, to, to), out)
	require.Eventually(t, func() bool {
		out, _, err = depot(t, "", "topic", "reassign", "--status", b)
		return err == nil && out == "no reassignment in progress\n"
	}, 20*time.Second, 50*time.Millisecond, "status: %s", out)
	out, errOut, err = depot(t, "", "topic", "describe", "moving", "-o", "json", b)
	require.NoError(t, err, errOut)
	require.NoError(t, json.Unmarshal([]byte(out), &described), out)
	require.Equal(t, []int32{from, to}, described.Partitions[0].Replicas)
	require.Equal(t, []int32{}, described.Partitions[0].Adding)
	_, _, err = depot(t, "", "topic", "reassign", "moving", "--partition", "0", "--replicas", fmt.Sprintf("%d,%d", from, to), b)
	require.EqualError(t, err, fmt.Sprintf("moving-0 already has replicas [%d %d]: nothing to reassign", from, to))

	// A new order only: done at once.
	out, errOut, err = depot(t, "", "topic", "reassign", "moving", "--partition", "0", "--replicas", fmt.Sprintf("%d,%d", to, from), b)
	require.NoError(t, err, errOut)
	require.Equal(t, fmt.Sprintf("reassigned moving-0: replicas %d,%d\n", to, from), out)
}
