package cli

import (
	"fmt"
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
