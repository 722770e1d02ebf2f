package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"
	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"

	"github.com/depot-dev/depot/actors/actortest"
	"github.com/depot-dev/depot/actors/client"
	"github.com/depot-dev/depot/node"
)

// depot runs `depot args...` with the client commands under a root like the
// depot command's, and returns what they printed and their error.
func depot(t *testing.T, stdin string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	return depotWith(t, strings.NewReader(stdin), nil, args...)
}

// depotWith is depot reading stdin from in, and interrupted by what
// interrupts carries rather than by the process's signals.
func depotWith(t *testing.T, in io.Reader, interrupts <-chan os.Signal, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err = depotIO(t, in, &out, &errOut, interrupts, args...)
	return out.String(), errOut.String(), err
}

// depotIO is depotWith writing to stdout and stderr as it goes.
func depotIO(t *testing.T, in io.Reader, stdout, stderr io.Writer, interrupts <-chan os.Signal, args ...string) error {
	t.Helper()
	root := &cobra.Command{Use: "depot", SilenceUsage: true, SilenceErrors: true}
	root.SetOut(stdout)
	root.SetErr(stderr)
	notify := func(c chan<- os.Signal) func() {
		done := make(chan struct{})
		go func() {
			for {
				select {
				case s := <-interrupts:
					select {
					case c <- s:
					case <-done:
						return
					}
				case <-done:
					return
				}
			}
		}()
		return func() { close(done) }
	}
	addCommands(root, &globals{stdin: in, stdout: stdout, stderr: stderr, notify: notify})
	root.SetArgs(args)
	return root.Execute()
}

func startTestNode(t *testing.T) *node.Node {
	t.Helper()
	n, err := node.Start(node.Config{DataDir: t.TempDir(), Listen: "127.0.0.1:0", Logger: actortest.Logger(t, logrus.WarnLevel)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = n.Stop() })
	return n
}

func TestCommandsAsAUser(t *testing.T) {
	n := startTestNode(t)
	b := "--brokers=" + n.Address()

	out, errOut, err := depot(t, "", "topic", "create", "orders", "-p", "3", "-c", "retention.ms=3600000", b)
	require.NoError(t, err, errOut)
	require.Equal(t, "created topic orders with 3 partitions\n", out)
	out, errOut, err = depot(t, "", "topic", "create", "single", b)
	require.NoError(t, err, errOut)
	require.Equal(t, "created topic single with 1 partition\n", out)

	out, _, err = depot(t, "", "topic", "list", "-o", "json", b)
	require.NoError(t, err)
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
	_, errOut, err = depot(t, lines.String(), "produce", "orders", "-k", ":", "--acks", "1", b)
	require.NoError(t, err, errOut)
	require.Contains(t, errOut, "produced 300 records")

	out, errOut, err = depot(t, "", "consume", "orders", "-n", "300", "-f", "%p %o %k %v\\n", b)
	require.NoError(t, err, errOut)
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

	out, errOut, err = depot(t, "", "topic", "describe", "orders", "-o", "json", b)
	require.NoError(t, err, errOut)
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

	out, errOut, err = depot(t, "", "disks", "-o", "json", b)
	require.NoError(t, err, errOut)
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
	out, errOut, err = depot(t, "", "disks", "balance", "--dry-run", b)
	require.NoError(t, err, errOut)
	require.Contains(t, out, "NOW")

	_, errOut, err = depot(t, "", "topic", "delete", "orders", b)
	require.NoError(t, err, errOut)
	out, _, _ = depot(t, "", "topic", "list", b)
	require.NotContains(t, out, "orders")
}

// Every -o json output gives a list, empty or not, where it means one:
// never null.
func TestJSONListsAreNeverNull(t *testing.T) {
	n := startTestNode(t)
	b := "--brokers=" + n.Address()
	jsonOf := func(args ...string) map[string]any {
		t.Helper()
		out, errOut, err := depot(t, "", append(args, "-o", "json", b)...)
		require.NoError(t, err, errOut)
		require.NotContains(t, out, "null", "%v: %s", args, out)
		var v any
		require.NoError(t, json.Unmarshal([]byte(out), &v), out)
		if m, ok := v.(map[string]any); ok {
			return m
		}
		return map[string]any{"": v}
	}
	// Nothing there yet: empty lists.
	require.Equal(t, []any{}, jsonOf("topic", "list")[""])
	require.Equal(t, []any{}, jsonOf("group", "list")[""])
	balance := jsonOf("disks", "balance", "--dry-run")
	require.Equal(t, []any{}, balance["moves"])
	require.Equal(t, []any{}, balance["running"])
	require.Len(t, balance["before"], 2)
	require.Len(t, balance["after"], 2)
	require.Len(t, jsonOf("disks")[""], 2)

	_, errOut, err := depot(t, "", "topic", "create", "orders", "-p", "2", b)
	require.NoError(t, err, errOut)
	described := jsonOf("topic", "describe", "orders")
	require.Len(t, described["partitions"], 2)
	require.NotEmpty(t, described["configs"])

	// A drain lists its moves, each with every field, partition 0 and all.
	disks := jsonOf("disks")[""].([]any)
	var busy string
	for _, d := range disks {
		if d := d.(map[string]any); d["partitions"].(float64) > 0 {
			busy = d["path"].(string)
			break
		}
	}
	require.NotEmpty(t, busy)
	moves := jsonOf("disks", "drain", busy)[""].([]any)
	require.NotEmpty(t, moves)
	for _, m := range moves {
		for _, field := range []string{"topic", "partition", "from_dir", "to_dir", "bytes"} {
			require.Contains(t, m, field)
		}
	}

	_, errOut, err = depot(t, "", "group", "reset-offsets", "g", "--topic", "orders", "--to-earliest", b)
	require.NoError(t, err, errOut)
	group := jsonOf("group", "describe", "g")
	require.Equal(t, []any{}, group["members"], "a group with committed offsets and no member")
	require.Len(t, group["partitions"], 2)
}
