package topic

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/depot-dev/depot/disk"
)

func TestDefaultTopicConfig(t *testing.T) {
	c := DefaultConfig()
	require.Equal(t, disk.DefaultConfig(), c.Log)
	require.Equal(t, int32(1048588), c.MaxMessageBytes)
	require.Equal(t, "delete", c.CleanupPolicy)
	require.Equal(t, int32(1), c.MinInsyncReplicas)
	require.NoError(t, c.Log.Validate())

	parsed, err := ParseConfig(nil)
	require.NoError(t, err)
	require.Equal(t, c, parsed)
}

func TestParseTopicConfig(t *testing.T) {
	tests := []struct {
		name   string
		in     map[string]string
		modify func(c *Config)
	}{
		{"empty", map[string]string{}, func(*Config) {}},
		{"segment.bytes", map[string]string{"segment.bytes": "1048576"}, func(c *Config) { c.Log.SegmentBytes = 1 << 20 }},
		{"segment.bytes max int32", map[string]string{"segment.bytes": "2147483647"}, func(c *Config) { c.Log.SegmentBytes = math.MaxInt32 }},
		{"segment.ms", map[string]string{"segment.ms": "60000"}, func(c *Config) { c.Log.SegmentMs = time.Minute }},
		{"segment.ms minimum", map[string]string{"segment.ms": "1"}, func(c *Config) { c.Log.SegmentMs = time.Millisecond }},
		{"retention.ms", map[string]string{"retention.ms": "3600000"}, func(c *Config) { c.Log.RetentionMs = time.Hour }},
		{"retention.ms unlimited", map[string]string{"retention.ms": "-1"}, func(c *Config) { c.Log.RetentionMs = -time.Millisecond }},
		{"retention.ms zero", map[string]string{"retention.ms": "0"}, func(c *Config) { c.Log.RetentionMs = 0 }},
		{"retention.bytes", map[string]string{"retention.bytes": "1073741824"}, func(c *Config) { c.Log.RetentionBytes = 1 << 30 }},
		{"retention.bytes unlimited", map[string]string{"retention.bytes": "-1"}, func(c *Config) { c.Log.RetentionBytes = -1 }},
		{"index.interval.bytes", map[string]string{"index.interval.bytes": "0"}, func(c *Config) { c.Log.IndexIntervalBytes = 0 }},
		{"flush.messages", map[string]string{"flush.messages": "1"}, func(c *Config) { c.Log.FlushMessages = 1 }},
		{"flush.ms", map[string]string{"flush.ms": "0"}, func(c *Config) { c.Log.FlushMs = 0 }},
		{"flush.ms never", map[string]string{"flush.ms": "9223372036854775807"}, func(c *Config) { c.Log.FlushMs = math.MaxInt64 }},
		{"flush.ms saturates", map[string]string{"flush.ms": "9223372036855"}, func(c *Config) { c.Log.FlushMs = math.MaxInt64 }},
		{"max.message.bytes", map[string]string{"max.message.bytes": "0"}, func(c *Config) { c.MaxMessageBytes = 0 }},
		{"cleanup.policy delete", map[string]string{"cleanup.policy": "delete"}, func(*Config) {}},
		{"cleanup.policy delete twice", map[string]string{"cleanup.policy": "delete, delete"}, func(*Config) {}},
		{"min.insync.replicas", map[string]string{"min.insync.replicas": "2"}, func(c *Config) { c.MinInsyncReplicas = 2 }},
		{"spaces trimmed", map[string]string{"segment.bytes": " 4096 "}, func(c *Config) { c.Log.SegmentBytes = 4096 }},
		{"several", map[string]string{"segment.bytes": "4096", "retention.bytes": "8192", "max.message.bytes": "1000"}, func(c *Config) {
			c.Log.SegmentBytes, c.Log.RetentionBytes, c.MaxMessageBytes = 4096, 8192, 1000
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := DefaultConfig()
			tt.modify(&want)
			got, err := ParseConfig(tt.in)
			require.NoError(t, err)
			require.Equal(t, want, got)

			again, err := ParseConfig(got.Map())
			require.NoError(t, err)
			require.Equal(t, got, again, "Map does not round-trip")
		})
	}
}

func TestParseTopicConfigErrors(t *testing.T) {
	tests := []struct {
		name string
		in   map[string]string
		want []string // substrings of the error
	}{
		{"unknown key", map[string]string{"segment.byte": "1"}, []string{`unknown key "segment.byte"`}},
		{"empty key", map[string]string{"": "1"}, []string{`unknown key ""`}},
		{"not a number", map[string]string{"segment.bytes": "big"}, []string{"segment.bytes", `"big"`, "not an integer"}},
		{"empty value", map[string]string{"retention.ms": ""}, []string{"retention.ms", `""`, "not an integer"}},
		{"float", map[string]string{"flush.messages": "1.5"}, []string{"flush.messages", `"1.5"`}},
		{"overflow", map[string]string{"retention.bytes": "99999999999999999999"}, []string{"retention.bytes", "not an integer"}},
		{"segment.bytes below Kafka minimum", map[string]string{"segment.bytes": "13"}, []string{"segment.bytes", `"13"`, "below the minimum 14"}},
		{"segment.bytes below log minimum", map[string]string{"segment.bytes": "14"}, []string{"segment.bytes", "14"}},
		{"segment.bytes above int32", map[string]string{"segment.bytes": "2147483648"}, []string{"segment.bytes", "above the maximum 2147483647"}},
		{"segment.ms zero", map[string]string{"segment.ms": "0"}, []string{"segment.ms", `"0"`, "below the minimum 1"}},
		{"retention.ms below -1", map[string]string{"retention.ms": "-2"}, []string{"retention.ms", `"-2"`, "below the minimum -1"}},
		{"retention.bytes below -1", map[string]string{"retention.bytes": "-5"}, []string{"retention.bytes", `"-5"`}},
		{"index.interval.bytes negative", map[string]string{"index.interval.bytes": "-1"}, []string{"index.interval.bytes", `"-1"`}},
		{"flush.messages zero", map[string]string{"flush.messages": "0"}, []string{"flush.messages", `"0"`, "below the minimum 1"}},
		{"flush.ms negative", map[string]string{"flush.ms": "-1"}, []string{"flush.ms", `"-1"`}},
		{"max.message.bytes negative", map[string]string{"max.message.bytes": "-1"}, []string{"max.message.bytes", `"-1"`}},
		{"max.message.bytes above int32", map[string]string{"max.message.bytes": "2147483648"}, []string{"max.message.bytes"}},
		{"min.insync.replicas zero", map[string]string{"min.insync.replicas": "0"}, []string{"min.insync.replicas", `"0"`}},
		{"cleanup.policy compact", map[string]string{"cleanup.policy": "compact"}, []string{"cleanup.policy", `"compact"`, "compaction is not supported"}},
		{"cleanup.policy both", map[string]string{"cleanup.policy": "delete,compact"}, []string{"cleanup.policy", "compaction is not supported"}},
		{"cleanup.policy unknown", map[string]string{"cleanup.policy": "shred"}, []string{"cleanup.policy", `"shred"`}},
		{"cleanup.policy empty", map[string]string{"cleanup.policy": ""}, []string{"cleanup.policy"}},
		{"first bad key in sorted order", map[string]string{"segment.ms": "0", "flush.ms": "-1"}, []string{"flush.ms"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseConfig(tt.in)
			require.Error(t, err)
			require.True(t, errors.Is(err, ErrInvalidConfig), err.Error())
			require.Equal(t, Config{}, got)
			for _, s := range tt.want {
				require.Contains(t, err.Error(), s)
			}
		})
	}
}

func TestTopicConfigMap(t *testing.T) {
	m := DefaultConfig().Map()
	require.Equal(t, map[string]string{
		"segment.bytes":                  "1073741824",
		"segment.ms":                     "604800000",
		"retention.ms":                   "604800000",
		"retention.bytes":                "-1",
		"index.interval.bytes":           "4096",
		"flush.messages":                 "9223372036854775807",
		"flush.ms":                       "9223372036854775807",
		"max.message.bytes":              "1048588",
		"cleanup.policy":                 "delete",
		"min.insync.replicas":            "1",
		"unclean.leader.election.enable": "false",
	}, m)

	c, err := ParseConfig(map[string]string{ConfigUncleanLeaderElection: "TRUE"})
	require.NoError(t, err)
	require.True(t, c.UncleanLeaderElection)
	_, err = ParseConfig(map[string]string{ConfigUncleanLeaderElection: "yes"})
	require.ErrorIs(t, err, ErrInvalidConfig)
	require.ErrorContains(t, err, `unclean.leader.election.enable "yes" is neither true nor false`)

	c = DefaultConfig()
	c.Log.RetentionMs = -time.Millisecond
	require.Equal(t, "-1", c.Map()["retention.ms"])
}

// FuzzParseTopicConfig feeds one key and value: parsing never panics, an
// error names ErrInvalidConfig, and a success round-trips through Map.
func FuzzParseTopicConfig(f *testing.F) {
	for k, v := range DefaultConfig().Map() {
		f.Add(k, v)
	}
	f.Add("retention.ms", "-1")
	f.Add("segment.bytes", "13")
	f.Add("cleanup.policy", "compact,delete")
	f.Add("flush.ms", "99999999999999999")
	f.Add("unknown", "1")
	f.Fuzz(func(t *testing.T, key, value string) {
		c, err := ParseConfig(map[string]string{key: value})
		if err != nil {
			require.True(t, errors.Is(err, ErrInvalidConfig), err.Error())
			return
		}
		require.NoError(t, c.Log.Validate())
		again, err := ParseConfig(c.Map())
		require.NoError(t, err)
		require.Equal(t, c, again)
	})
}
