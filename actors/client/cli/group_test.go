package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"

	"github.com/depot-dev/depot/actors/client"
	"github.com/depot-dev/depot/node"
)

// groupOffsets is `depot group describe -o json`, reduced to committed
// offsets per partition.
func groupOffsets(t *testing.T, b, group string) (state string, committed map[int32]int64, members int) {
	t.Helper()
	out, errOut, err := depot(t, "", "group", "describe", group, "-o", "json", b)
	require.NoError(t, err, errOut)
	var d struct {
		State      string `json:"state"`
		Members    []any  `json:"members"`
		Partitions []struct {
			Partition int32 `json:"partition"`
			Committed int64 `json:"committed"`
			LogEnd    int64 `json:"log_end_offset"`
			Lag       int64 `json:"lag"`
		} `json:"partitions"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &d), out)
	committed = map[int32]int64{}
	for _, p := range d.Partitions {
		committed[p.Partition] = p.Committed
		if p.Committed >= 0 {
			require.Equal(t, p.LogEnd-p.Committed, p.Lag)
		}
	}
	return d.State, committed, len(d.Members)
}

func sum(m map[int32]int64) (n int64) {
	for _, v := range m {
		n += max(v, 0)
	}
	return n
}

func TestGroupCommands(t *testing.T) {
	n := startTestNode(t)
	b := "--brokers=" + n.Address()
	_, errOut, err := depot(t, "", "topic", "create", "orders", "-p", "2", b)
	require.NoError(t, err, errOut)
	var lines strings.Builder
	for i := range 100 {
		fmt.Fprintf(&lines, "k%d:v%d\n", i, i)
	}
	_, errOut, err = depot(t, lines.String(), "produce", "orders", "-k", ":", b)
	require.NoError(t, err, errOut)

	// Two runs of a group consumer read everything once: the first
	// committed exactly what it printed.
	seen := map[string]int{}
	out, errOut, err := depot(t, "", "consume", "orders", "-g", "g", "-n", "30", b)
	require.NoError(t, err, errOut)
	for _, v := range strings.Fields(out) {
		seen[v]++
	}
	state, committed, members := groupOffsets(t, b, "g")
	require.Equal(t, "Empty", state)
	require.Zero(t, members)
	require.Equal(t, int64(30), sum(committed), "committed what was printed: %v", committed)
	out, errOut, err = depot(t, "", "consume", "orders", "-g", "g", "-n", "70", b)
	require.NoError(t, err, errOut)
	for _, v := range strings.Fields(out) {
		seen[v]++
	}
	require.Len(t, seen, 100)
	for v, n := range seen {
		require.Equal(t, 1, n, "%s read twice", v)
	}
	_, committed, _ = groupOffsets(t, b, "g")
	require.Equal(t, int64(100), sum(committed))

	out, errOut, err = depot(t, "", "group", "list", "-o", "json", b)
	require.NoError(t, err, errOut)
	var groups []struct {
		Group   string `json:"group"`
		State   string `json:"state"`
		Members int    `json:"members"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &groups), out)
	require.Len(t, groups, 1)
	require.Equal(t, "g", groups[0].Group)
	require.Equal(t, "Empty", groups[0].State)

	// A group with a member refuses resets and deletion, and describe shows
	// who owns what.
	logger := logrus.New()
	logger.SetOutput(io.Discard)
	c, err := client.New(client.Brokers(n.Address()), client.Logger(logrus.NewEntry(logger)))
	require.NoError(t, err)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	busy, err := c.NewGroupConsumer("busy", []string{"orders"}, client.ResetOffset(client.ResetEarliest))
	require.NoError(t, err)
	_, err = busy.Poll(ctx)
	require.NoError(t, err)
	out, errOut, err = depot(t, "", "group", "describe", "busy", b)
	require.NoError(t, err, errOut)
	require.Contains(t, out, busy.MemberID())
	require.Contains(t, out, "orders-0,orders-1")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown group", []string{"group", "describe", "nope", b}, `group "nope" does not exist`},
		{"delete unknown group", []string{"group", "delete", "nope", b}, `group "nope" does not exist`},
		{"reset while active", []string{"group", "reset-offsets", "busy", "--topic", "orders", "--to-earliest", b}, `group "busy" is not empty (Stable, 1 member): stop its consumers before resetting its offsets`},
		{"delete while active", []string{"group", "delete", "busy", b}, `group "busy" is not empty: stop its consumers first`},
		{"reset of an unknown topic", []string{"group", "reset-offsets", "g", "--topic", "nope", "--to-earliest", b}, `topic "nope" does not exist`},
		{"consume an unknown topic", []string{"consume", "nope", "-g", "g", "-n", "1", b}, "unknown topic nope"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, errOut, err := depot(t, "", tc.args...)
			require.Error(t, err)
			require.False(t, node.IsUsage(err), "a failure, not a usage error: %v", err)
			require.ErrorContains(t, err, tc.want)
			require.NotContains(t, err.Error(), "client: ")
			require.Empty(t, errOut, "nothing on stderr but the error")
		})
	}
	busy.Close()

	// Reset to the start: the group reads everything again.
	out, errOut, err = depot(t, "", "group", "reset-offsets", "g", "--topic", "orders", "--to-earliest", "-o", "json", b)
	require.NoError(t, err, errOut)
	var reset []struct {
		Partition int32 `json:"partition"`
		Previous  int64 `json:"previous"`
		Offset    int64 `json:"offset"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &reset), out)
	require.Len(t, reset, 2)
	for _, r := range reset {
		require.Zero(t, r.Offset)
		require.Equal(t, committed[r.Partition], r.Previous)
	}
	out, errOut, err = depot(t, "", "group", "reset-offsets", "g", "--topic", "orders", "--partitions", "1", "--to-offset", "1000", b)
	require.NoError(t, err, errOut)
	require.Contains(t, out, "PREVIOUS")
	_, committed, _ = groupOffsets(t, b, "g")
	require.Zero(t, committed[0])
	end, err := c.ListOffset(ctx, "orders", 1, client.LatestOffset)
	require.NoError(t, err)
	require.Equal(t, end, committed[1], "an offset past the end is kept at the end")
	out, errOut, err = depot(t, "", "consume", "orders", "-g", "g", "-n", fmt.Sprint(100-end), "-f", "%p\\n", b)
	require.NoError(t, err, errOut)
	require.Equal(t, strings.Repeat("0\n", int(100-end)), out)

	out, errOut, err = depot(t, "", "group", "delete", "g", b)
	require.NoError(t, err, errOut)
	require.Equal(t, "deleted group g\n", out)
	_, _, err = depot(t, "", "group", "describe", "g", b)
	require.Error(t, err)
	require.False(t, node.IsUsage(err), "a failure, not a usage error: %v", err)
	require.ErrorContains(t, err, `group "g" does not exist`)
}
