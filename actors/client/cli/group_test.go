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
		{"consume an unknown topic", []string{"consume", "nope", "-g", "g", "-n", "1", b}, `topic "nope" does not exist`},
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

func TestTotalLag(t *testing.T) {
	row := func(committed, end int64) groupPartitionRow {
		r := groupPartitionRow{Committed: committed, LogEndOffset: end, Lag: -1}
		if committed >= 0 && end >= 0 {
			r.Lag = end - committed
		}
		return r
	}
	for _, tc := range []struct {
		name  string
		parts []groupPartitionRow
		want  string
	}{
		{"no partitions", nil, "0"},
		{"all committed", []groupPartitionRow{row(2, 8), row(10, 10)}, "6"},
		{"one not committed", []groupPartitionRow{row(2, 8), row(-1, 12)}, "6, not counting 1 partition with no committed offset"},
		{"none committed", []groupPartitionRow{row(-1, 8), row(-1, 12)}, "0, not counting 2 partitions with no committed offset"},
		{"a log end unknown", []groupPartitionRow{row(2, 8), row(-1, 12), row(4, -1)},
			"6, not counting 1 partition with no committed offset and 1 partition whose log end offset is unknown"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, totalLag(tc.parts))
		})
	}
}

// A member's partitions are described whether or not it has committed
// them: those it has not show "-" as their committed offset and lag, as
// Kafka's kafka-consumer-groups shows them, and TOTAL-LAG says it leaves
// them out.
func TestGroupDescribeShowsPartitionsNotCommitted(t *testing.T) {
	n := startTestNode(t)
	b := "--brokers=" + n.Address()
	_, errOut, err := depot(t, "", "topic", "create", "orders", "-p", "3", b)
	require.NoError(t, err, errOut)
	var lines strings.Builder
	for i := range 30 {
		fmt.Fprintf(&lines, "k%d:v%d\n", i, i)
	}
	_, errOut, err = depot(t, lines.String(), "produce", "orders", "-k", ":", b)
	require.NoError(t, err, errOut)

	logger := logrus.New()
	logger.SetOutput(io.Discard)
	c, err := client.New(client.Brokers(n.Address()), client.Logger(logrus.NewEntry(logger)))
	require.NoError(t, err)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	member, err := c.NewGroupConsumer("slow", []string{"orders"}, client.ResetOffset(client.ResetEarliest), client.AutoCommit(0))
	require.NoError(t, err)
	defer member.Close()
	_, err = member.Poll(ctx)
	require.NoError(t, err)
	require.NoError(t, member.CommitOffsets(ctx, map[client.TopicPartition]int64{{Topic: "orders", Partition: 0}: 2}))
	ends := map[int32]int64{}
	for p := range int32(3) {
		ends[p], err = c.ListOffset(ctx, "orders", p, client.LatestOffset)
		require.NoError(t, err)
	}

	out, errOut, err := depot(t, "", "group", "describe", "slow", "-o", "json", b)
	require.NoError(t, err, errOut)
	var d groupDescription
	require.NoError(t, json.Unmarshal([]byte(out), &d), out)
	require.Len(t, d.Members, 1)
	require.Equal(t, []string{"orders-0", "orders-1", "orders-2"}, d.Members[0].Partitions)
	require.Equal(t, []groupPartitionRow{
		{Topic: "orders", Partition: 0, Committed: 2, LogEndOffset: ends[0], Lag: ends[0] - 2, Owner: member.MemberID()},
		{Topic: "orders", Partition: 1, Committed: -1, LogEndOffset: ends[1], Lag: -1, Owner: member.MemberID()},
		{Topic: "orders", Partition: 2, Committed: -1, LogEndOffset: ends[2], Lag: -1, Owner: member.MemberID()},
	}, d.Partitions, "every assigned partition, committed or not")

	out, errOut, err = depot(t, "", "group", "describe", "slow", b)
	require.NoError(t, err, errOut)
	require.Contains(t, out, fmt.Sprintf("TOTAL-LAG   %d, not counting 2 partitions with no committed offset\n", ends[0]-2))
	for p := range int32(3) {
		committed, lag := "-", "-"
		if p == 0 {
			committed, lag = "2", fmt.Sprint(ends[0]-2)
		}
		require.Regexp(t, fmt.Sprintf(`(?m)^orders\s+%d\s+%s\s+%d\s+%s\s+%s$`, p, committed, ends[p], lag, member.MemberID()), out)
	}
}
