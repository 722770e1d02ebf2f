package cli

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/depot-dev/depot/actors/client"
	"github.com/depot-dev/depot/messages"
	"github.com/depot-dev/depot/node"
)

func TestTopicAlterCommands(t *testing.T) {
	n := startTestNode(t)
	b := "--brokers=" + n.Address()
	_, errOut, err := depot(t, "", "topic", "create", "orders", b)
	require.NoError(t, err, errOut)

	out, errOut, err := depot(t, "", "topic", "add-partitions", "orders", "--partitions", "3", b)
	require.NoError(t, err, errOut)
	require.Equal(t, "topic orders has 3 partitions\n", out)
	_, _, err = depot(t, "", "topic", "add-partitions", "orders", "-p", "2", b)
	var refused *client.Error
	require.True(t, errors.As(err, &refused), "%v", err)
	require.Equal(t, messages.ErrorCode_INVALID_PARTITIONS, refused.Code)
	require.ErrorContains(t, err, "never removed")
	_, _, err = depot(t, "", "topic", "add-partitions", "orders", b)
	require.Error(t, err, "--partitions is required")

	out, errOut, err = depot(t, "", "topic", "alter-config", "orders", "-c", "retention.ms=60000", "-c", "max.message.bytes=2000", b)
	require.NoError(t, err, errOut)
	require.Equal(t, "topic orders has configs set: max.message.bytes=2000, retention.ms=60000\n", out)
	out, errOut, err = depot(t, "", "topic", "alter-config", "orders", "--delete", "retention.ms", "-o", "json", b)
	require.NoError(t, err, errOut)
	var altered struct {
		ConfigsSet map[string]string `json:"configs_set"`
		Configs    map[string]string `json:"configs"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &altered), out)
	require.Equal(t, map[string]string{"max.message.bytes": "2000"}, altered.ConfigsSet)
	require.Equal(t, "604800000", altered.Configs["retention.ms"])

	_, _, err = depot(t, "", "topic", "alter-config", "orders", "-c", "colour=red", b)
	require.True(t, errors.As(err, &refused), "%v", err)
	require.Equal(t, messages.ErrorCode_INVALID_CONFIG, refused.Code)
	_, _, err = depot(t, "", "topic", "alter-config", "orders", b)
	var usage *node.UsageError
	require.ErrorAs(t, err, &usage)
	_, _, err = depot(t, "", "topic", "alter-config", "orders", "-c", "retention.ms=1", "--delete", "retention.ms", b)
	require.ErrorAs(t, err, &usage)

	out, errOut, err = depot(t, "", "topic", "describe", "orders", "-o", "json", b)
	require.NoError(t, err, errOut)
	var described struct {
		Configs    map[string]string `json:"configs"`
		Partitions []struct {
			Partition int32 `json:"partition"`
		} `json:"partitions"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &described))
	require.Len(t, described.Partitions, 3)
	require.Equal(t, "2000", described.Configs["max.message.bytes"], "the refusals changed nothing")
}

func TestParseConfigs(t *testing.T) {
	got, err := parseConfigs([]string{"a=1", "b=x=y", "c="})
	require.NoError(t, err)
	require.Equal(t, map[string]string{"a": "1", "b": "x=y", "c": ""}, got)
	for _, bad := range [][]string{{"novalue"}, {"=1"}, {"a=1", "a=2"}} {
		_, err := parseConfigs(bad)
		var usage *node.UsageError
		require.ErrorAs(t, err, &usage, "%v", bad)
	}
}
