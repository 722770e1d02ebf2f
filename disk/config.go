package disk

import (
	"errors"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/depot-dev/depot/wire"
)

// ErrConfig is wrapped by Config.Validate for a setting that makes no sense.
var ErrConfig = errors.New("disk: invalid config")

// Config holds a log's settings, named and defaulted as Kafka's topic configs.
// The zero value is not usable; start from DefaultConfig.
type Config struct {
	// SegmentBytes is segment.bytes: a segment is rolled before an append
	// would take it past this size. Default 1 GiB. A batch larger than this
	// still goes into a fresh segment of its own.
	SegmentBytes int64
	// SegmentMs is segment.ms: a segment whose first batch is older than this
	// (by Options.Now) is rolled at the next append or MaybeRoll. Default 7 days.
	SegmentMs time.Duration
	// IndexIntervalBytes is index.interval.bytes: the offset index gets an
	// entry each time at least this many bytes of batches were appended since
	// the last entry. Default 4096.
	IndexIntervalBytes int
	// RetentionMs is retention.ms: ApplyRetention deletes segments whose
	// largest timestamp is older than this. Default 7 days; < 0: unlimited.
	RetentionMs time.Duration
	// RetentionBytes is retention.bytes: ApplyRetention deletes the oldest
	// segments while the log is larger than this. Default -1: unlimited.
	RetentionBytes int64
	// FlushMessages is flush.messages: Append flushes once this many offsets
	// are above the recovery point. Default math.MaxInt64: never.
	FlushMessages int64
	// FlushMs is flush.ms: Append flushes when the last flush is older than
	// this. Default math.MaxInt64: never.
	FlushMs time.Duration
}

// DefaultConfig returns Kafka's defaults.
func DefaultConfig() Config {
	return Config{
		SegmentBytes:       1 << 30,
		SegmentMs:          7 * 24 * time.Hour,
		IndexIntervalBytes: 4096,
		RetentionMs:        7 * 24 * time.Hour,
		RetentionBytes:     -1,
		FlushMessages:      math.MaxInt64,
		FlushMs:            math.MaxInt64,
	}
}

// minSegmentBytes is the smallest segment.bytes accepted: the smallest batch
// (a header and one empty record) must fit.
const minSegmentBytes = wire.HeaderSize + 14

// Validate reports the first setting that makes no sense, wrapping ErrConfig.
func (c Config) Validate() error {
	switch {
	case c.SegmentBytes < minSegmentBytes:
		return fmt.Errorf("%w: segment.bytes %d is below the minimum %d", ErrConfig, c.SegmentBytes, minSegmentBytes)
	case c.SegmentBytes > math.MaxUint32:
		return fmt.Errorf("%w: segment.bytes %d does not fit the 32-bit index positions", ErrConfig, c.SegmentBytes)
	case c.SegmentMs <= 0:
		return fmt.Errorf("%w: segment.ms %v must be positive", ErrConfig, c.SegmentMs)
	case c.IndexIntervalBytes < 0:
		return fmt.Errorf("%w: index.interval.bytes %d is negative", ErrConfig, c.IndexIntervalBytes)
	case c.RetentionBytes < -1:
		return fmt.Errorf("%w: retention.bytes %d (use -1 for unlimited)", ErrConfig, c.RetentionBytes)
	case c.FlushMessages < 1:
		return fmt.Errorf("%w: flush.messages %d must be at least 1", ErrConfig, c.FlushMessages)
	case c.FlushMs < 0:
		return fmt.Errorf("%w: flush.ms %v is negative", ErrConfig, c.FlushMs)
	}
	return nil
}

// NoLeaderEpoch is the partition leader epoch of a batch written before
// its partition had a leader epoch, and the Options.LeaderEpoch of such a
// partition.
const NoLeaderEpoch int32 = -1

// Options are what Open needs besides the directory.
type Options struct {
	Config
	// RecoveryPoint is the offset below which the log is known to be synced
	// (from the recovery-point checkpoint). Open validates and re-indexes
	// the log from the offset index entry at or below it; at the end of the
	// log (a clean stop) it reads no batch. A recovery point past the end of
	// the log is stale, and the last segment is validated whole. Default 0:
	// everything is validated.
	RecoveryPoint int64
	// LogStartOffset is the log start offset from the log-start checkpoint;
	// 0 if unknown. Segments entirely below it are deleted on Open.
	LogStartOffset int64
	// LeaderEpoch is the partition's leader epoch: the highest partition
	// leader epoch a batch of the log may carry, raised to the latest
	// epoch of the leader-epoch checkpoint if that is higher, and later by
	// Log.AssignEpoch and Log.SetLeaderEpoch. Append refuses a batch above
	// it, and recovery takes one above it for damage, since the CRC does
	// not cover the field (but not when the checkpoint is missing: see
	// Open). NoLeaderEpoch until the partition has one; the zero value
	// allows epoch 0.
	LeaderEpoch int32
	// Now is the clock for segment.ms, retention.ms and flush.ms. Default time.Now.
	Now func() time.Time
	// Logger receives recovery warnings and roll notices. Default: discards.
	Logger *logrus.Entry
	// Files is the cache the log's segment files (.log, .index,
	// .timeindex) are opened through, shared by every log of a node so
	// that they hold at most its capacity of descriptors open between
	// them. Default: a cache of the log's own with no bound, which never
	// closes a file the log has open.
	Files *FileCache
}

func (o *Options) setDefaults() {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Files == nil {
		o.Files = NewFileCache(0)
	}
	if o.Logger == nil {
		o.Logger = discardLogger
	}
}

// discardLogger is the logger of the logs given none: it writes nothing.
var discardLogger = func() *logrus.Entry {
	l := logrus.New()
	l.SetOutput(io.Discard)
	return logrus.NewEntry(l)
}()
