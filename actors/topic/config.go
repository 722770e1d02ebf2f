package topic

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/depot-dev/depot/disk"
)

// Topic config keys, named as Kafka names them.
const (
	ConfigSegmentBytes       = "segment.bytes"
	ConfigSegmentMs          = "segment.ms"
	ConfigRetentionMs        = "retention.ms"
	ConfigRetentionBytes     = "retention.bytes"
	ConfigIndexIntervalBytes = "index.interval.bytes"
	ConfigFlushMessages      = "flush.messages"
	ConfigFlushMs            = "flush.ms"
	ConfigMaxMessageBytes    = "max.message.bytes"
	ConfigCleanupPolicy      = "cleanup.policy"
	ConfigMinInsyncReplicas  = "min.insync.replicas"
	// ConfigUncleanLeaderElection lets a replica outside the ISR lead when
	// no member of it is left, losing what only the ISR had.
	ConfigUncleanLeaderElection = "unclean.leader.election.enable"
)

// Defaults that are not the log's (for those see disk.DefaultConfig).
const (
	// DefaultMaxMessageBytes is Kafka's max.message.bytes default: 1 MiB plus
	// the batch overhead.
	DefaultMaxMessageBytes = 1048588
	// CleanupPolicyDelete is the only cleanup.policy supported: old segments
	// are deleted by retention.
	CleanupPolicyDelete = "delete"
	// CleanupPolicyCompact is Kafka's log compaction, not supported yet.
	CleanupPolicyCompact = "compact"
)

// Kafka's lower bounds. segment.bytes must at least hold Kafka's smallest
// legacy record (14 bytes); disk.Config.Validate adds the log's own bound on
// top.
const (
	minSegmentBytes       = 14
	minSegmentMs          = 1
	minRetentionMs        = -1
	minRetentionBytes     = -1
	minIndexIntervalBytes = 0
	minFlushMessages      = 1
	minFlushMs            = 0
	minMaxMessageBytes    = 0
	minMinInsyncReplicas  = 1
)

// ErrInvalidConfig is wrapped by ParseConfig for an unknown key or a bad
// value.
var ErrInvalidConfig = errors.New("topic: invalid topic config")

// Config is a topic's effective configuration. The zero value is not
// usable; start from DefaultConfig or ParseConfig.
type Config struct {
	// Log holds the settings of each partition's log: segment.bytes,
	// segment.ms, retention.ms, retention.bytes, index.interval.bytes,
	// flush.messages and flush.ms, with disk.DefaultConfig's defaults.
	Log disk.Config
	// MaxMessageBytes is max.message.bytes: the largest batch a produce may
	// append. Default DefaultMaxMessageBytes (1048588).
	MaxMessageBytes int32
	// CleanupPolicy is cleanup.policy. Default and only value "delete".
	CleanupPolicy string
	// MinInsyncReplicas is min.insync.replicas. Default 1.
	MinInsyncReplicas int32
	// UncleanLeaderElection is unclean.leader.election.enable. Default
	// false, as Kafka's.
	UncleanLeaderElection bool
}

// DefaultConfig returns Kafka's topic defaults.
func DefaultConfig() Config {
	return Config{
		Log:               disk.DefaultConfig(),
		MaxMessageBytes:   DefaultMaxMessageBytes,
		CleanupPolicy:     CleanupPolicyDelete,
		MinInsyncReplicas: 1,
	}
}

// ParseConfig returns DefaultConfig with the overrides in m
// applied. Keys are Kafka's names (the Config* constants); values are
// decimal integers, milliseconds for the *.ms keys, -1 meaning unlimited for
// retention.ms and retention.bytes. Leading and trailing spaces are ignored.
// An unknown key, a value that is not a number, a value below Kafka's
// minimum, cleanup.policy other than "delete", or a log config that
// disk.Config.Validate refuses, is an error wrapping ErrInvalidConfig that
// names the key and the value. Keys are checked in sorted order, so the
// error for several bad keys is always the same one.
func ParseConfig(m map[string]string) (Config, error) {
	c := DefaultConfig()
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, key := range keys {
		if err := c.set(key, strings.TrimSpace(m[key])); err != nil {
			return Config{}, err
		}
	}
	if err := c.Log.Validate(); err != nil {
		return Config{}, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return c, nil
}

// set applies one key.
func (c *Config) set(key, value string) error {
	var err error
	switch key {
	case ConfigSegmentBytes:
		var v int64
		v, err = parseInt(key, value, minSegmentBytes, math.MaxInt32)
		c.Log.SegmentBytes = v
	case ConfigSegmentMs:
		c.Log.SegmentMs, err = parseMs(key, value, minSegmentMs)
	case ConfigRetentionMs:
		c.Log.RetentionMs, err = parseMs(key, value, minRetentionMs)
	case ConfigRetentionBytes:
		c.Log.RetentionBytes, err = parseInt(key, value, minRetentionBytes, math.MaxInt64)
	case ConfigIndexIntervalBytes:
		var v int64
		v, err = parseInt(key, value, minIndexIntervalBytes, math.MaxInt32)
		c.Log.IndexIntervalBytes = int(v)
	case ConfigFlushMessages:
		c.Log.FlushMessages, err = parseInt(key, value, minFlushMessages, math.MaxInt64)
	case ConfigFlushMs:
		c.Log.FlushMs, err = parseMs(key, value, minFlushMs)
	case ConfigMaxMessageBytes:
		var v int64
		v, err = parseInt(key, value, minMaxMessageBytes, math.MaxInt32)
		c.MaxMessageBytes = int32(v)
	case ConfigMinInsyncReplicas:
		var v int64
		v, err = parseInt(key, value, minMinInsyncReplicas, math.MaxInt32)
		c.MinInsyncReplicas = int32(v)
	case ConfigCleanupPolicy:
		c.CleanupPolicy, err = parseCleanupPolicy(value)
	case ConfigUncleanLeaderElection:
		c.UncleanLeaderElection, err = parseBool(key, value)
	default:
		return fmt.Errorf("%w: unknown key %q", ErrInvalidConfig, key)
	}
	return err
}

// parseInt parses a decimal integer in [lo, hi].
func parseInt(key, value string, lo, hi int64) (int64, error) {
	v, err := strconv.ParseInt(value, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: %s %q is not an integer", ErrInvalidConfig, key, value)
	}
	if v < lo {
		return 0, fmt.Errorf("%w: %s %q is below the minimum %d", ErrInvalidConfig, key, value, lo)
	}
	if v > hi {
		return 0, fmt.Errorf("%w: %s %q is above the maximum %d", ErrInvalidConfig, key, value, hi)
	}
	return v, nil
}

// parseBool parses "true" or "false", in any case, as Kafka does.
func parseBool(key, value string) (bool, error) {
	switch strings.ToLower(value) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, fmt.Errorf("%w: %s %q is neither true nor false", ErrInvalidConfig, key, value)
}

// parseMs parses milliseconds into a duration, saturating at the largest
// duration (Kafka's Long.MAX_VALUE ms, the "never" of flush.ms, does not fit
// a time.Duration). Negative values (only -1 passes the minimum where it is
// allowed) become -1 ms.
func parseMs(key, value string, lo int64) (time.Duration, error) {
	ms, err := parseInt(key, value, lo, math.MaxInt64)
	if err != nil {
		return 0, err
	}
	if ms > int64(math.MaxInt64/time.Millisecond) {
		return math.MaxInt64, nil
	}
	return time.Duration(ms) * time.Millisecond, nil
}

func parseCleanupPolicy(value string) (string, error) {
	var deletePolicy, compact bool
	for _, p := range strings.Split(value, ",") {
		switch strings.TrimSpace(p) {
		case CleanupPolicyDelete:
			deletePolicy = true
		case CleanupPolicyCompact:
			compact = true
		default:
			return "", fmt.Errorf("%w: %s %q: valid policies are %q and %q",
				ErrInvalidConfig, ConfigCleanupPolicy, value, CleanupPolicyDelete, CleanupPolicyCompact)
		}
	}
	if compact {
		return "", fmt.Errorf("%w: %s %q: compaction is not supported, only %q",
			ErrInvalidConfig, ConfigCleanupPolicy, value, CleanupPolicyDelete)
	}
	if !deletePolicy {
		return "", fmt.Errorf("%w: %s %q is empty", ErrInvalidConfig, ConfigCleanupPolicy, value)
	}
	return CleanupPolicyDelete, nil
}

// formatMs renders a duration as Kafka's milliseconds: -1 for unlimited (any
// negative duration) and Long.MAX_VALUE for the saturated "never".
func formatMs(d time.Duration) string {
	switch {
	case d < 0:
		return "-1"
	case d == math.MaxInt64:
		return strconv.FormatInt(math.MaxInt64, 10)
	}
	return strconv.FormatInt(int64(d/time.Millisecond), 10)
}

// Map returns every key of the effective configuration, defaults included,
// as ParseConfig reads them: ParseConfig(c.Map()) gives c back.
func (c Config) Map() map[string]string {
	retentionBytes := c.Log.RetentionBytes
	if retentionBytes < 0 {
		retentionBytes = -1
	}
	return map[string]string{
		ConfigSegmentBytes:          strconv.FormatInt(c.Log.SegmentBytes, 10),
		ConfigSegmentMs:             formatMs(c.Log.SegmentMs),
		ConfigRetentionMs:           formatMs(c.Log.RetentionMs),
		ConfigRetentionBytes:        strconv.FormatInt(retentionBytes, 10),
		ConfigIndexIntervalBytes:    strconv.Itoa(c.Log.IndexIntervalBytes),
		ConfigFlushMessages:         strconv.FormatInt(c.Log.FlushMessages, 10),
		ConfigFlushMs:               formatMs(c.Log.FlushMs),
		ConfigMaxMessageBytes:       strconv.FormatInt(int64(c.MaxMessageBytes), 10),
		ConfigCleanupPolicy:         c.CleanupPolicy,
		ConfigMinInsyncReplicas:     strconv.FormatInt(int64(c.MinInsyncReplicas), 10),
		ConfigUncleanLeaderElection: strconv.FormatBool(c.UncleanLeaderElection),
	}
}

// ProducerBatchesKept is how many recent batches per producer a partition
// keeps for finding duplicates: an idempotent producer may have at most
// this many requests in flight per partition. Kafka keeps five, its
// clients' max.in.flight with idempotence; Depot's client sends more with
// acks=all, whose requests mostly wait for a group commit's fsync.
const ProducerBatchesKept = 16

// RetentionMillis is retention.ms as Kafka writes it: -1 for unlimited.
func RetentionMillis(d time.Duration) int64 {
	if d < 0 {
		return -1
	}
	return d.Milliseconds()
}
