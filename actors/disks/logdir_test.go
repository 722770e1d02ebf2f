package disks

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"
	"github.com/stretchr/testify/require"

	"github.com/depot-dev/depot/actors/actortest"
	"github.com/depot-dev/depot/disk"
	"github.com/depot-dev/depot/messages"
)

// Size changes reported by many partitions at once reach the placement
// actor as one usage report naming them all, not one report each.
func TestLogDirGathersSizeChangesIntoOneUsageReport(t *testing.T) {
	const partitions = 500
	system := actortest.System(t)
	var mu sync.Mutex
	var reports []*messages.LogDirInfo
	placement := system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if m, ok := ctx.Message().(*logDirUsage); ok {
			mu.Lock()
			reports = append(reports, m.info)
			mu.Unlock()
		}
	}))
	logger := logrus.New()
	logger.SetLevel(logrus.WarnLevel)
	dir := system.Root.Spawn(NewLogDirProps(LogDirConfig{
		Path: t.TempDir(), FS: disk.OS, Placement: placement, UsageInterval: time.Hour, CheckpointInterval: time.Hour,
		Logger: logrus.NewEntry(logger),
	}))
	for i := range partitions {
		system.Root.Send(dir, &PartitionReport{TP: disk.TopicPartition{Topic: "t", Partition: int32(i)}, SizeBytes: int64(i + 1)})
	}
	want := int64(partitions * (partitions + 1) / 2)
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(reports) > 0 && reports[len(reports)-1].Bytes == want
	}, 5*time.Second, 10*time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	require.LessOrEqual(t, len(reports), 2, "one report for the burst, or two if it straddled the delay")
	last := reports[len(reports)-1]
	require.Equal(t, int32(partitions), last.Partitions)
	require.Len(t, last.PartitionUsage, partitions)
}

// A partition's write rate is its appended bytes over the time between its
// reports, by the log dir's clock.
func TestLogDirWriteRateByItsClock(t *testing.T) {
	system := actortest.System(t)
	usage := make(chan *messages.LogDirInfo, 16)
	placement := system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if m, ok := ctx.Message().(*logDirUsage); ok {
			usage <- m.info
		}
	}))
	var mu sync.Mutex
	now := time.Unix(1000, 0)
	clock := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return now
	}
	logger := logrus.New()
	logger.SetLevel(logrus.WarnLevel)
	dir := system.Root.Spawn(NewLogDirProps(LogDirConfig{
		Path: t.TempDir(), FS: disk.OS, Placement: placement, UsageInterval: time.Hour, CheckpointInterval: time.Hour,
		Now: clock, Logger: logrus.NewEntry(logger),
	}))
	<-usage // the report at start
	tp := disk.TopicPartition{Topic: "t", Partition: 0}
	system.Root.Send(dir, &PartitionReport{TP: tp, SizeBytes: 1})
	require.Zero(t, (<-usage).WriteBytesPerS)
	mu.Lock()
	now = now.Add(2 * time.Second)
	mu.Unlock()
	system.Root.Send(dir, &PartitionReport{TP: tp, SizeBytes: 2 << 20, AppendedBytes: 2 << 20})
	info := <-usage
	require.InDelta(t, decayRate(0, 2<<20, 2*time.Second), info.WriteBytesPerS, 1e-6)
	require.Greater(t, info.WriteBytesPerS, 0.0)
}

// What recovery did to the partitions of a log dir after an unclean stop
// is logged as one line for the dir, not one per partition.
func TestLogDirSummarisesRecovery(t *testing.T) {
	system := actortest.System(t)
	logger, hook := test.NewNullLogger()
	dir := system.Root.Spawn(NewLogDirProps(LogDirConfig{
		Path: t.TempDir(), FS: disk.OS, UsageInterval: time.Hour, CheckpointInterval: time.Hour, Logger: logrus.NewEntry(logger),
	}))
	for i, r := range []disk.Recovery{
		{SegmentsValidated: 1, BytesValidated: 100, BytesTruncated: 7, Took: 20 * time.Millisecond},
		{SegmentsValidated: 2, BytesValidated: 300, SegmentsDeleted: 1, Took: 50 * time.Millisecond},
	} {
		system.Root.Send(dir, &PartitionReport{TP: disk.TopicPartition{Topic: "t", Partition: int32(i)}, Recovered: &r})
	}
	var summary *logrus.Entry
	require.Eventually(t, func() bool {
		for _, e := range hook.AllEntries() {
			if e.Message == "recovered partitions after an unclean stop" {
				summary = e
				return true
			}
		}
		return false
	}, 5*time.Second, 20*time.Millisecond)
	require.Equal(t, logrus.InfoLevel, summary.Level)
	require.Equal(t, logrus.Fields{
		"actor": "logdir", "dir": summary.Data["dir"], "partitions": 2, "segments_validated": 3, "bytes_validated": int64(400),
		"bytes_truncated": int64(7), "segments_deleted": 1, "longest": "50ms",
	}, summary.Data)
}

// A log dir counts the partitions it finds on disk from its first usage
// report, before any has opened: the .log files of their segments. With a
// declared capacity that leaves it under twice its reserve free, it starts
// full.
func TestLogDirCountsPartitionsOnDiskAtStart(t *testing.T) {
	for _, tc := range []struct {
		capacity int64
		state    string
	}{{capacity: 1000 + 2*100, state: LogDirFull}, {capacity: 1000 + 2*100 + 1, state: LogDirOnline}} {
		dir := t.TempDir()
		part := filepath.Join(dir, "t-3")
		require.NoError(t, os.Mkdir(part, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(part, disk.SegmentFileName(0, ".log")), make([]byte, 600), 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(part, disk.SegmentFileName(50, ".log")), make([]byte, 400), 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(part, disk.SegmentFileName(0, ".index")), make([]byte, 999), 0o644))
		require.NoError(t, os.Mkdir(filepath.Join(dir, "not-a-partition.future"), 0o755))
		system := actortest.System(t)
		usage := make(chan *messages.LogDirInfo, 16)
		placement := system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
			if m, ok := ctx.Message().(*logDirUsage); ok {
				usage <- m.info
			}
		}))
		system.Root.Spawn(NewLogDirProps(LogDirConfig{
			Path: dir, FS: disk.OS, Capacity: tc.capacity, Reserve: Reserve{Bytes: 100}, Placement: placement,
			UsageInterval: time.Hour, CheckpointInterval: time.Hour, Logger: logrus.NewEntry(actortest.Logger(t, logrus.ErrorLevel)),
		}))
		info := <-usage
		require.Equal(t, int64(1000), info.Bytes)
		require.Equal(t, []*messages.PartitionUsage{{Topic: "t", Partition: 3, Bytes: 1000}}, info.PartitionUsage)
		require.Equal(t, tc.state, info.State, "capacity %d", tc.capacity)
	}
}
