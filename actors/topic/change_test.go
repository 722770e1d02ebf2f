package topic

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestApplyChanges(t *testing.T) {
	value := func(s string) *string { return &s }
	set := map[string]string{"retention.ms": "1000", "segment.bytes": "4096"}
	tests := []struct {
		name    string
		replace bool
		changes []Change
		want    map[string]string
		err     error
	}{
		{"nothing", false, nil, set, nil},
		{"set adds", false, []Change{{Key: "max.message.bytes", Op: OpSet, Value: value("100")}},
			map[string]string{"retention.ms": "1000", "segment.bytes": "4096", "max.message.bytes": "100"}, nil},
		{"set replaces a value", false, []Change{{Key: "retention.ms", Op: OpSet, Value: value("5")}},
			map[string]string{"retention.ms": "5", "segment.bytes": "4096"}, nil},
		{"delete", false, []Change{{Key: "retention.ms", Op: OpDelete}}, map[string]string{"segment.bytes": "4096"}, nil},
		{"delete a key not set", false, []Change{{Key: "flush.ms", Op: OpDelete}}, set, nil},
		{"replace keeps only what it sets", true, []Change{{Key: "flush.ms", Op: OpSet, Value: value("10")}},
			map[string]string{"flush.ms": "10"}, nil},
		{"replace with nothing clears", true, nil, map[string]string{}, nil},
		{"append to a list not set starts from its default", false, []Change{{Key: "cleanup.policy", Op: OpAppend, Value: value("compact")}},
			map[string]string{"retention.ms": "1000", "segment.bytes": "4096", "cleanup.policy": "delete,compact"}, nil},
		{"append what the list holds", false, []Change{{Key: "cleanup.policy", Op: OpAppend, Value: value(" delete ")}},
			map[string]string{"retention.ms": "1000", "segment.bytes": "4096", "cleanup.policy": "delete"}, nil},
		{"subtract", false, []Change{{Key: "cleanup.policy", Op: OpSubtract, Value: value("delete")}},
			map[string]string{"retention.ms": "1000", "segment.bytes": "4096", "cleanup.policy": ""}, nil},
		{"unknown key", false, []Change{{Key: "retention.hours", Op: OpSet, Value: value("1")}}, nil, ErrInvalidConfig},
		{"unknown key deleted", false, []Change{{Key: "retention.hours", Op: OpDelete}}, nil, ErrInvalidConfig},
		{"append to a key that is not a list", false, []Change{{Key: "retention.ms", Op: OpAppend, Value: value("1")}}, nil, ErrInvalidConfig},
		{"subtract from a key that is not a list", false, []Change{{Key: "retention.ms", Op: OpSubtract, Value: value("1")}}, nil, ErrInvalidConfig},
		{"unknown operation", false, []Change{{Key: "retention.ms", Op: Op(9), Value: value("1")}}, nil, ErrInvalidConfig},
		{"a key twice", false, []Change{{Key: "retention.ms", Op: OpSet, Value: value("1")}, {Key: "retention.ms", Op: OpDelete}}, nil, ErrInvalidChange},
		{"set without a value", false, []Change{{Key: "retention.ms", Op: OpSet}}, nil, ErrInvalidChange},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := map[string]string{"retention.ms": "1000", "segment.bytes": "4096"}
			got, err := ApplyChanges(before, tt.replace, tt.changes)
			require.Equal(t, set, before, "the configs given are not modified")
			if tt.err != nil {
				require.ErrorIs(t, err, tt.err)
				require.Nil(t, got)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

// What ApplyChanges leaves is checked by ParseConfig: an empty
// cleanup.policy, and compact, are refused there.
func TestApplyChangesThenParse(t *testing.T) {
	compact := "compact"
	set, err := ApplyChanges(nil, false, []Change{{Key: ConfigCleanupPolicy, Op: OpAppend, Value: &compact}})
	require.NoError(t, err)
	_, err = ParseConfig(set)
	require.ErrorIs(t, err, ErrInvalidConfig)
	require.ErrorContains(t, err, "compaction is not supported")

	deletePolicy := "delete"
	set, err = ApplyChanges(nil, false, []Change{{Key: ConfigCleanupPolicy, Op: OpSubtract, Value: &deletePolicy}})
	require.NoError(t, err)
	_, err = ParseConfig(set)
	require.ErrorIs(t, err, ErrInvalidConfig)
	require.True(t, IsListConfig(ConfigCleanupPolicy))
	require.False(t, IsListConfig(ConfigRetentionMs))
}
