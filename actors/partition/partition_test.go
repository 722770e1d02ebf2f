package partition

import (
	"fmt"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"

	"github.com/depot-dev/depot/actors/topic"
	"github.com/depot-dev/depot/disk"
	"github.com/depot-dev/depot/messages"
	"github.com/depot-dev/depot/wire"
)

// A batch the log refuses for what it holds is the producer's fault: it is
// answered CORRUPT_MESSAGE, and the log directory stays up.
func TestAppendErrorsOfABadBatch(t *testing.T) {
	a := &partitionActor{cfg: &PartitionConfig{Logger: logrus.NewEntry(logrus.New())}}
	for _, err := range []error{wire.ErrBadCRC, wire.ErrShort, wire.ErrBadLength, wire.ErrBadMagic,
		wire.ErrRecordCount, wire.ErrCompression, wire.ErrLeaderEpoch} {
		code, msg := a.appendError(nil, fmt.Errorf("disk: append: %w", err))
		require.Equal(t, messages.ErrorCode_CORRUPT_MESSAGE, code, "%v", err)
		require.Contains(t, msg, messages.ErrorText(err))
		require.NotContains(t, msg, "disk: ", "no Go package prefix in a message for people")
	}
}

// The partition's clock is its log's: two hours of it later, one tick
// rolls the active segment by segment.ms and deletes every segment by
// retention.ms, with no waiting.
func TestTickFollowsTheClock(t *testing.T) {
	f := newMoveFixture(t, 4<<10, nil)
	f.stop(t)
	cfg, err := topic.ParseConfig(map[string]string{
		topic.ConfigSegmentBytes: "4096", topic.ConfigSegmentMs: "3600000", topic.ConfigRetentionMs: "3600000",
	})
	require.NoError(t, err)
	f.config = cfg
	f.tickInterval = time.Hour // the test sends the ticks
	clock := newTestClock(time.Now())
	f.now = clock.Now
	f.start(t, f.dirs[0], 0)
	f.fill(t, 20, 1000) // several segments, their records stamped now

	f.system.Root.Send(f.pid, &partitionTick{})
	status := moveRequest[*messages.PartitionStatusResponse](t, f, &messages.PartitionStatusRequest{})
	require.Equal(t, int64(0), status.LogStartOffset, "nothing is past retention yet")
	require.Greater(t, status.Segments, int32(2))

	clock.Advance(2 * time.Hour)
	f.system.Root.Send(f.pid, &partitionTick{})
	status = moveRequest[*messages.PartitionStatusResponse](t, f, &messages.PartitionStatusRequest{})
	require.Equal(t, int64(20), status.LogStartOffset)
	require.Equal(t, int64(20), status.LogEndOffset)
	require.Equal(t, int32(1), status.Segments, "the active segment rolled, and every segment went")
}

// A topic's configs changed while its partition runs apply from then on:
// a smaller max.message.bytes refuses the next batch that exceeds it, and
// a retention.ms that the records are past deletes them at the next tick.
func TestReconfigureAppliesFromThenOn(t *testing.T) {
	f := newMoveFixture(t, 4<<10, nil)
	f.stop(t)
	f.tickInterval = time.Hour // the test sends the ticks
	clock := newTestClock(time.Now())
	f.now = clock.Now
	f.start(t, f.dirs[0], 0)
	f.fill(t, 20, 1000)

	cfg, err := topic.ParseConfig(map[string]string{
		topic.ConfigSegmentBytes: "4096", topic.ConfigSegmentMs: "3600000", topic.ConfigRetentionMs: "3600000", topic.ConfigMaxMessageBytes: "500",
	})
	require.NoError(t, err)
	f.system.Root.Send(f.pid, &reconfigure{config: cfg})
	resp := moveRequest[*messages.ProduceResponse](t, f, &messages.ProduceRequest{Topic: "orders", Acks: 1, Records: f.batch(t, fmt.Sprintf("%01000d", 0))})
	require.Equal(t, messages.ErrorCode_MESSAGE_TOO_LARGE, resp.Error, resp.ErrorMessage)
	require.Equal(t, int32(500), resp.MaxMessageBytes)
	resp = moveRequest[*messages.ProduceResponse](t, f, &messages.ProduceRequest{Topic: "orders", Acks: 1, Records: f.batch(t, "small")})
	require.Equal(t, messages.ErrorCode_NONE, resp.Error, resp.ErrorMessage)

	clock.Advance(2 * time.Hour)
	f.system.Root.Send(f.pid, &partitionTick{})
	status := moveRequest[*messages.PartitionStatusResponse](t, f, &messages.PartitionStatusRequest{})
	require.Equal(t, int64(21), status.LogStartOffset, "segment.ms and retention.ms as changed, where the defaults keep 7 days")
}

// A partition opens its log through the node's file cache, and once it
// has gone a tick without an append it syncs all it wrote, so that the
// cache may close any of its files without an fsync of its own.
func TestIdlePartitionSettles(t *testing.T) {
	f := newMoveFixture(t, 64<<10, nil)
	f.stop(t)
	f.tickInterval = time.Hour // the test sends the ticks
	f.files = disk.NewFileCache(3)
	f.start(t, f.dirs[0], 0)
	status := moveRequest[*messages.PartitionStatusResponse](t, f, &messages.PartitionStatusRequest{})
	st := f.files.Stats()
	require.Equal(t, 3, st.Handles, "one segment's three files")
	require.Equal(t, 3, st.Idle, "an opened log holds no unsynced byte")

	// acks=all syncs the .log and keeps the few index entries in memory;
	// the acks=1 produces after it leave the .log unsynced.
	for _, value := range []string{fmt.Sprintf("%020000d", 0), "indexed"} {
		resp := moveRequest[*messages.ProduceResponse](t, f, &messages.ProduceRequest{Topic: "orders", Acks: -1, Records: f.batch(t, value)})
		require.Equal(t, messages.ErrorCode_NONE, resp.Error, resp.ErrorMessage)
	}
	f.fill(t, 10, 1000)
	require.Equal(t, 1, f.files.Stats().Unsynced, "unsynced bytes in the .log")

	f.system.Root.Send(f.pid, &partitionTick{}) // appended since the last: not idle
	status = moveRequest[*messages.PartitionStatusResponse](t, f, &messages.PartitionStatusRequest{})
	require.Less(t, status.RecoveryPoint, status.LogEndOffset)
	require.Equal(t, 1, f.files.Stats().Unsynced)

	f.system.Root.Send(f.pid, &partitionTick{}) // idle: settles
	status = moveRequest[*messages.PartitionStatusResponse](t, f, &messages.PartitionStatusRequest{})
	require.Equal(t, status.LogEndOffset, status.RecoveryPoint)
	st = f.files.Stats()
	require.Equal(t, 0, st.Unsynced)
	require.Equal(t, 3, st.Idle)
	require.Equal(t, int64(0), st.EvictionSyncs)
	require.Len(t, f.readAll(t), 12)
	f.stop(t)
	require.Equal(t, 0, f.files.Stats().Handles, "a stopped partition holds nothing")
}

// A partition on a cache of one descriptor works on: every append and
// read reopens the file it needs, and the cache syncs an unsynced file
// before it closes it.
func TestPartitionOnOneDescriptor(t *testing.T) {
	f := newMoveFixture(t, 4<<10, nil)
	f.stop(t)
	f.files = disk.NewFileCache(1)
	f.start(t, f.dirs[0], 0)
	values := f.fill(t, 30, 500)
	resp := moveRequest[*messages.ProduceResponse](t, f, &messages.ProduceRequest{Topic: "orders", Acks: -1, Records: f.batch(t, "last")})
	require.Equal(t, messages.ErrorCode_NONE, resp.Error, resp.ErrorMessage)
	require.Equal(t, append(values, "last"), f.readAll(t))
	st := f.files.Stats()
	require.LessOrEqual(t, st.Open, 1)
	require.Greater(t, st.Reopens, int64(0))
	require.Greater(t, st.EvictionSyncs, int64(0))
	f.stop(t)
	f.start(t, f.dirs[0], 31)
	require.Equal(t, append(values, "last"), f.readAll(t))
}
