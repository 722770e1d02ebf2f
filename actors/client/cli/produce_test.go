package cli

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/depot-dev/depot/node"
)

// --acks takes the spellings of Kafka's producers, as depot bench does, and
// the summary names the level as Kafka's tools do.
func TestProduceAcksSpellings(t *testing.T) {
	n := startTestNode(t)
	b := "--brokers=" + n.Address()
	_, errOut, err := depot(t, "", "topic", "create", "acks", b)
	require.NoError(t, err, errOut)
	tests := []struct {
		acks string
		want string
	}{
		{"0", "acks=0"},
		{"1", "acks=1"},
		{"-1", "acks=all"},
		{"all", "acks=all"},
		{"ALL", "acks=all"},
	}
	for _, tt := range tests {
		t.Run(tt.acks, func(t *testing.T) {
			_, errOut, err := depot(t, "a\nb\n", "produce", "acks", "--acks", tt.acks, b)
			require.NoError(t, err, errOut)
			require.Contains(t, errOut, "produced 2 records")
			require.Contains(t, errOut, tt.want+"\n")
		})
	}
	_, errOut, err = depot(t, "a\n", "produce", "acks", b)
	require.NoError(t, err, errOut)
	require.Contains(t, errOut, "acks=all\n", "all by default")
	for _, bad := range []string{"2", "none", ""} {
		_, _, err := depot(t, "a\n", "produce", "acks", "--acks", bad, b)
		require.True(t, node.IsUsage(err), "--acks %q: %v", bad, err)
		require.EqualError(t, err, fmt.Sprintf("--acks %s: want 0, 1, -1 or all", bad))
	}
}

// -p is a partition count on topic create, so produce and consume name
// their partitions with --partition; their older spellings, -p on both and
// --partitions on consume, are still taken but no longer shown.
func TestPartitionFlagSpellings(t *testing.T) {
	n := startTestNode(t)
	b := "--brokers=" + n.Address()
	_, errOut, err := depot(t, "", "topic", "create", "spelled", "-p", "3", b)
	require.NoError(t, err, errOut)
	_, errOut, err = depot(t, "one\n", "produce", "spelled", "--partition", "1", b)
	require.NoError(t, err, errOut)
	_, errOut, err = depot(t, "two\n", "produce", "spelled", "-p", "2", b)
	require.NoError(t, err, errOut)
	_, _, err = depot(t, "x\n", "produce", "spelled", "--partition", "1", "-p", "2", b)
	require.True(t, node.IsUsage(err), "%v", err)

	tests := []struct {
		name string
		args []string
		want string
	}{
		{"--partition", []string{"--partition", "1", "-n", "1"}, "1 one\n"},
		{"-p", []string{"-p", "2", "-n", "1"}, "2 two\n"},
		{"--partitions", []string{"--partitions", "2", "-n", "1"}, "2 two\n"},
		{"a list", []string{"--partition", "2,1", "-n", "2"}, "1 one\n2 two\n"},
		{"repeated", []string{"--partition", "2", "--partition", "1", "-n", "2"}, "1 one\n2 two\n"},
		{"both spellings", []string{"--partition", "1", "-p", "2", "-n", "2"}, "1 one\n2 two\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"consume", "spelled", "-f", "%p %v\\n", b}, tt.args...)
			out, errOut, err := depot(t, "", args...)
			require.NoError(t, err, errOut)
			lines := strings.SplitAfter(out, "\n")
			sort.Strings(lines)
			require.Equal(t, tt.want, strings.Join(lines, ""))
		})
	}
	_, _, err = depot(t, "", "consume", "spelled", "--partition", "3", b)
	require.EqualError(t, err, "--partition 3: topic spelled has partitions 0 to 2")

	for _, command := range []string{"produce", "consume"} {
		help, _, err := depot(t, "", command, "--help")
		require.NoError(t, err)
		require.Contains(t, help, "--partition ")
		require.NotContains(t, help, "--partitions")
		require.NotContains(t, help, "-p,")
		require.NotContains(t, help, "--p ")
	}
	help, _, err := depot(t, "", "topic", "create", "--help")
	require.NoError(t, err)
	require.Contains(t, help, "-p, --partitions")
}
