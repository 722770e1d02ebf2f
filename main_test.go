package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"

	"github.com/depot-dev/depot/actors/client"
	"github.com/depot-dev/depot/node"
)

// cli runs the depot command in-process.
func cli(t *testing.T, stdin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(args, strings.NewReader(stdin), &out, &errOut)
	return out.String(), errOut.String(), code
}

func startTestNode(t *testing.T) *node.Node {
	t.Helper()
	logger := logrus.New()
	logger.SetLevel(logrus.WarnLevel)
	n, err := node.Start(node.Config{DataDir: t.TempDir(), Listen: "127.0.0.1:0", Logger: logger})
	require.NoError(t, err)
	t.Cleanup(func() { _ = n.Stop() })
	return n
}

func TestCLIAsAUser(t *testing.T) {
	n := startTestNode(t)
	b := "--brokers=" + n.Address()

	out, errOut, code := cli(t, "", "topic", "create", "orders", "-p", "3", "-c", "retention.ms=3600000", b)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "created topic orders with 3 partitions\n", out)

	out, _, code = cli(t, "", "topic", "list", "-o", "json", b)
	require.Equal(t, 0, code)
	var topics []struct {
		Name       string `json:"name"`
		Partitions int    `json:"partitions"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &topics))
	require.Equal(t, "orders", topics[0].Name)
	require.Equal(t, 3, topics[0].Partitions)

	var lines strings.Builder
	for i := 0; i < 300; i++ {
		fmt.Fprintf(&lines, "user-%d:order-%d\n", i%7, i)
	}
	_, errOut, code = cli(t, lines.String(), "produce", "orders", "-k", ":", "--acks", "1", b)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, errOut, "produced 300 records")

	out, errOut, code = cli(t, "", "consume", "orders", "-n", "300", "-f", "%p %o %k %v\\n", b)
	require.Equal(t, 0, code, errOut)
	got := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, got, 300)
	seen := map[string]bool{}
	nextOffset := map[string]int{}
	for _, line := range got {
		var partition, key, value string
		var offset int
		_, err := fmt.Sscanf(line, "%s %d %s %s", &partition, &offset, &key, &value)
		require.NoError(t, err, line)
		require.Equal(t, nextOffset[partition], offset, "offsets per partition in order: %s", line)
		nextOffset[partition]++
		require.Equal(t, fmt.Sprint(client.KeyPartition([]byte(key), 3)), partition, "key %s on its murmur2 partition", key)
		require.False(t, seen[value], "duplicate %s", value)
		seen[value] = true
	}

	out, errOut, code = cli(t, "", "topic", "describe", "orders", "-o", "json", b)
	require.Equal(t, 0, code, errOut)
	var described struct {
		Configs    map[string]string `json:"configs"`
		Partitions []struct {
			LogDir       string `json:"log_dir"`
			LogEndOffset int64  `json:"log_end_offset"`
			Bytes        int64  `json:"bytes"`
		} `json:"partitions"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &described))
	require.Equal(t, "3600000", described.Configs["retention.ms"])
	var total int64
	for _, p := range described.Partitions {
		require.NotEmpty(t, p.LogDir)
		total += p.LogEndOffset
		if p.LogEndOffset > 0 {
			require.Positive(t, p.Bytes)
		}
	}
	require.Equal(t, int64(300), total)

	out, errOut, code = cli(t, "", "disks", "-o", "json", b)
	require.Equal(t, 0, code, errOut)
	var disks []map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &disks))
	require.Len(t, disks, 2)
	for _, d := range disks {
		for _, field := range []string{"path", "state", "partitions", "bytes", "capacity_bytes", "free_bytes"} {
			require.Contains(t, d, field)
		}
		require.Equal(t, "online", d["state"])
		require.Positive(t, d["capacity_bytes"])
	}
	out, errOut, code = cli(t, "", "disks", "balance", "--dry-run", b)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "NOW")

	_, errOut, code = cli(t, "", "topic", "delete", "orders", b)
	require.Equal(t, 0, code, errOut)
	out, _, _ = cli(t, "", "topic", "list", b)
	require.NotContains(t, out, "orders")
}

func TestCLIErrors(t *testing.T) {
	n := startTestNode(t)
	b := "--brokers=" + n.Address()
	_, errOut, code := cli(t, "", "topic", "create", "small", "-c", "max.message.bytes=200", b)
	require.Equal(t, 0, code, errOut)

	for _, tc := range []struct {
		name  string
		stdin string
		args  []string
		code  int
		want  string
	}{
		{"unknown topic", "", []string{"consume", "nope", "-n", "1", b}, 1, "unknown topic nope"},
		{"unknown topic on produce", "x\n", []string{"produce", "nope", b}, 1, "UNKNOWN_TOPIC_OR_PARTITION"},
		{"record too large", strings.Repeat("x", 500) + "\n", []string{"produce", "small", b}, 1, "MESSAGE_TOO_LARGE"},
		{"node unreachable", "", []string{"topic", "list", "--brokers", unusedAddress(t)}, 1, "node unreachable"},
		{"bad flag", "", []string{"topic", "list", "--no-such-flag"}, 2, "unknown flag"},
		{"bad acks", "", []string{"produce", "small", "--acks", "7", b}, 2, "--acks 7"},
		{"bad offset", "", []string{"consume", "small", "--offset", "soon", b}, 2, "--offset"},
		{"bad config", "", []string{"topic", "create", "x", "-c", "retention.ms", b}, 2, "key=value"},
		{"invalid config value", "", []string{"topic", "create", "x", "-c", "retention.ms=soon", b}, 1, "INVALID_CONFIG"},
		{"invalid topic name", "", []string{"topic", "create", "bad/name", b}, 1, "INVALID_TOPIC"},
		{"bad output", "", []string{"topic", "list", "-o", "yaml", b}, 2, "-o"},
		{"missing argument", "", []string{"topic", "describe", b}, 2, "arg"},
		{"bad log dirs", "", []string{"node", "--log-dirs", "/tmp/a=lots", "--listen", "127.0.0.1:0"}, 2, "bad size"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, errOut, code := cli(t, tc.stdin, tc.args...)
			require.Equal(t, tc.code, code, errOut)
			require.Contains(t, errOut, tc.want)
			require.Equal(t, 1, strings.Count(strings.TrimSpace(errOut), "\n")+1, "one line: %q", errOut)
		})
	}
	// Nothing was created or written by the refused commands.
	out, _, _ := cli(t, "", "topic", "list", b)
	require.NotContains(t, out, "\nx ")
	out, _, _ = cli(t, "", "topic", "describe", "small", "-o", "json", b)
	require.Contains(t, out, `"log_end_offset": 0`)
}

// unusedAddress is a loopback address where nothing listens.
func unusedAddress(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

func TestCLIGroupUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"empty group id on consume", []string{"consume", "orders", "-g", ""}, "empty group id"},
		{"partitions with a group", []string{"consume", "orders", "-g", "g", "-p", "0"}, "-p cannot be used with -g"},
		{"exact offset with a group", []string{"consume", "orders", "-g", "g", "--offset", "5"}, "want start or end"},
		{"empty group id on describe", []string{"group", "describe", ""}, "empty group id"},
		{"empty group id on delete", []string{"group", "delete", ""}, "empty group id"},
		{"empty group id on reset", []string{"group", "reset-offsets", "", "--topic", "t", "--to-earliest"}, "empty group id"},
		{"reset without a target", []string{"group", "reset-offsets", "g", "--topic", "t"}, "exactly one of"},
		{"reset with two targets", []string{"group", "reset-offsets", "g", "--topic", "t", "--to-earliest", "--to-latest"}, "exactly one of"},
		{"reset without a topic", []string{"group", "reset-offsets", "g", "--to-earliest"}, "--topic is required"},
		{"reset to a bad time", []string{"group", "reset-offsets", "g", "--topic", "t", "--to-datetime", "yesterday"}, "RFC 3339"},
		{"reset to a negative offset", []string{"group", "reset-offsets", "g", "--topic", "t", "--to-offset", "-3"}, "non-negative"},
		{"describe without a group", []string{"group", "describe"}, "arg"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Refused before any node is contacted.
			_, errOut, code := cli(t, "", append(tc.args, "--brokers", unusedAddress(t))...)
			require.Equal(t, 2, code, errOut)
			require.Contains(t, errOut, tc.want)
			require.Equal(t, 1, strings.Count(strings.TrimSpace(errOut), "\n")+1, "one line: %q", errOut)
		})
	}
}

// groupOffsets is `depot group describe -o json`, reduced to committed
// offsets per partition.
func groupOffsets(t *testing.T, b, group string) (state string, committed map[int32]int64, members int) {
	t.Helper()
	out, errOut, code := cli(t, "", "group", "describe", group, "-o", "json", b)
	require.Equal(t, 0, code, errOut)
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

func TestCLIGroups(t *testing.T) {
	n := startTestNode(t)
	b := "--brokers=" + n.Address()
	_, errOut, code := cli(t, "", "topic", "create", "orders", "-p", "2", b)
	require.Equal(t, 0, code, errOut)
	var lines strings.Builder
	for i := range 100 {
		fmt.Fprintf(&lines, "k%d:v%d\n", i, i)
	}
	_, errOut, code = cli(t, lines.String(), "produce", "orders", "-k", ":", b)
	require.Equal(t, 0, code, errOut)

	// Two runs of a group consumer read everything once: the first
	// committed exactly what it printed.
	seen := map[string]int{}
	out, errOut, code := cli(t, "", "consume", "orders", "-g", "g", "-n", "30", b)
	require.Equal(t, 0, code, errOut)
	for _, v := range strings.Fields(out) {
		seen[v]++
	}
	state, committed, members := groupOffsets(t, b, "g")
	require.Equal(t, "Empty", state)
	require.Zero(t, members)
	require.Equal(t, int64(30), sum(committed), "committed what was printed: %v", committed)
	out, errOut, code = cli(t, "", "consume", "orders", "-g", "g", "-n", "70", b)
	require.Equal(t, 0, code, errOut)
	for _, v := range strings.Fields(out) {
		seen[v]++
	}
	require.Len(t, seen, 100)
	for v, n := range seen {
		require.Equal(t, 1, n, "%s read twice", v)
	}
	_, committed, _ = groupOffsets(t, b, "g")
	require.Equal(t, int64(100), sum(committed))

	out, errOut, code = cli(t, "", "group", "list", "-o", "json", b)
	require.Equal(t, 0, code, errOut)
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
	out, errOut, code = cli(t, "", "group", "describe", "busy", b)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, busy.MemberID())
	require.Contains(t, out, "orders-0,orders-1")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown group", []string{"group", "describe", "nope", b}, "unknown group nope"},
		{"delete unknown group", []string{"group", "delete", "nope", b}, "unknown group nope"},
		{"reset while active", []string{"group", "reset-offsets", "busy", "--topic", "orders", "--to-earliest", b}, "group busy is not empty"},
		{"delete while active", []string{"group", "delete", "busy", b}, "group busy is not empty"},
		{"reset of an unknown topic", []string{"group", "reset-offsets", "g", "--topic", "nope", "--to-earliest", b}, "unknown topic nope"},
		{"consume an unknown topic", []string{"consume", "nope", "-g", "g", "-n", "1", b}, "unknown topic nope"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, errOut, code := cli(t, "", tc.args...)
			require.Equal(t, 1, code, errOut)
			require.Contains(t, errOut, tc.want)
			require.Equal(t, 1, strings.Count(strings.TrimSpace(errOut), "\n")+1, "one line: %q", errOut)
		})
	}
	busy.Close()

	// Reset to the start: the group reads everything again.
	out, errOut, code = cli(t, "", "group", "reset-offsets", "g", "--topic", "orders", "--to-earliest", "-o", "json", b)
	require.Equal(t, 0, code, errOut)
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
	out, errOut, code = cli(t, "", "group", "reset-offsets", "g", "--topic", "orders", "--partitions", "1", "--to-offset", "1000", b)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "PREVIOUS")
	_, committed, _ = groupOffsets(t, b, "g")
	require.Zero(t, committed[0])
	end, err := c.ListOffset(ctx, "orders", 1, client.LatestOffset)
	require.NoError(t, err)
	require.Equal(t, end, committed[1], "an offset past the end is kept at the end")
	out, errOut, code = cli(t, "", "consume", "orders", "-g", "g", "-n", fmt.Sprint(100-end), "-f", "%p\\n", b)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, strings.Repeat("0\n", int(100-end)), out)

	out, errOut, code = cli(t, "", "group", "delete", "g", b)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "deleted group g\n", out)
	_, errOut, code = cli(t, "", "group", "describe", "g", b)
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "unknown group g")
}
