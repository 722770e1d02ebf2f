package disks

import (
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/depot-dev/depot/actors/placement"
	"github.com/depot-dev/depot/messages"
)

func TestDescribeLoads(t *testing.T) {
	now := map[string]*messages.LogDirInfo{
		"/a": {Path: "/a", State: LogDirOnline, CapacityBytes: 1000, FreeBytes: 700, Bytes: 300, Partitions: 2, WriteBytesPerS: 30, ProjectedBytes: 300,
			PartitionUsage: []*messages.PartitionUsage{
				{Topic: "t", Partition: 0, Bytes: 100, WriteBytesPerS: 10, RetentionBytes: -1, RetentionMs: -1},
				{Topic: "t", Partition: 1, Bytes: 200, WriteBytesPerS: 20, RetentionBytes: -1, RetentionMs: -1},
			}},
		"/b": {Path: "/b", State: LogDirOnline, CapacityBytes: 5000, FreeBytes: 4500, Bytes: 0, WriteBytesPerS: 0},
	}
	loads := func(moves ...placement.Move) []placement.DirLoad {
		before := []placement.DirLoad{
			{Path: "/a", Capacity: 1000, Online: true, Partitions: []placement.PartitionLoad{{Topic: "t", Partition: 0, Bytes: 100}, {Topic: "t", Partition: 1, Bytes: 200}}},
			{Path: "/b", Capacity: 5000, Online: true},
		}
		after, err := placement.Simulate(before, moves)
		require.NoError(t, err)
		return after
	}

	t.Run("no move: exactly as now", func(t *testing.T) {
		got := describeLoads(loads(), now)
		require.Len(t, got, 2)
		require.True(t, proto.Equal(now["/a"], got[0]), "%v", got[0])
		require.True(t, proto.Equal(now["/b"], got[1]), "%v", got[1])
	})
	t.Run("a move changes only what it moves", func(t *testing.T) {
		got := describeLoads(loads(placement.Move{Topic: "t", Partition: 1, From: "/a", To: "/b", Bytes: 200}), now)
		a, b := got[0], got[1]
		require.Equal(t, int64(100), a.Bytes)
		require.Equal(t, int64(900), a.FreeBytes)
		require.Equal(t, 10.0, a.WriteBytesPerS)
		require.Equal(t, int32(1), a.Partitions)
		require.Equal(t, int64(200), b.Bytes)
		require.Equal(t, int64(4300), b.FreeBytes, "the live free bytes less the move, not the capacity less the bytes")
		require.Equal(t, 20.0, b.WriteBytesPerS)
		require.Equal(t, int32(1), b.Partitions)
		require.Equal(t, int64(1000), a.CapacityBytes)
		require.Equal(t, LogDirOnline, b.State)
	})
}

// The balancer keeps each dir below its capacity less twice its reserve,
// whatever high-water mark it is given: a dir with a reserve of 10 bytes
// of 100, holding 85, is brought down to 80 though the mark is 99%.
func TestBalancerHighWaterStaysBelowTheReserve(t *testing.T) {
	usage := func(path string, reserve int64, parts int) *messages.LogDirInfo {
		info := &messages.LogDirInfo{Path: path, State: LogDirOnline, CapacityBytes: 100, ReserveBytes: reserve}
		for i := range parts {
			info.PartitionUsage = append(info.PartitionUsage, &messages.PartitionUsage{Topic: path, Partition: int32(i), Bytes: 5})
		}
		return info
	}
	settings := BalanceSettings{HighWater: 0.99, MaxDeviation: 0.5, MinMoveBytes: -1}.withDefaults()
	for _, tc := range []struct {
		reserve int64
		moves   int
	}{{reserve: 10, moves: 1}, {reserve: 0, moves: 0}} {
		a := &placementActor{
			cfg:   PlacementConfig{Balance: settings},
			order: []string{"/a", "/b"},
			dirs:  map[string]*messages.LogDirInfo{"/a": usage("/a", tc.reserve, 17), "/b": usage("/b", 0, 10)},
		}
		moves := a.plan()
		require.Len(t, moves, tc.moves, "reserve %d", tc.reserve)
		for _, m := range moves {
			require.Equal(t, "/a", m.From)
		}
	}
}

func TestMoveAsked(t *testing.T) {
	dirs := map[string]*messages.LogDirInfo{
		"/a": {Path: "/a", State: LogDirOnline, PartitionUsage: []*messages.PartitionUsage{{Topic: "t", Partition: 0, Bytes: 100}, {Topic: "t", Partition: 1}}},
		"/b": {Path: "/b", State: LogDirOnline, PartitionUsage: []*messages.PartitionUsage{{Topic: "t", Partition: 2}}},
		"/c": {Path: "/c", State: LogDirOffline, Error: "input/output error"},
		"/d": {Path: "/d", State: LogDirFull},
		"/e": {Path: "/e", State: LogDirDraining, Draining: true},
	}
	running := &placement.Move{Topic: "t", Partition: 1, From: "/a", To: "/b"}
	asked := []placement.Move{{Topic: "t", Partition: 2, To: "/a"}}
	for _, c := range []struct {
		name      string
		partition int32
		dir       string
		code      messages.ErrorCode
		queue     bool
	}{
		{"to another dir", 0, "/b", messages.ErrorCode_NONE, true},
		{"a path not cleaned", 0, "/b/", messages.ErrorCode_NONE, true},
		{"where it is", 0, "/a", messages.ErrorCode_NONE, false},
		{"where it is moving", 1, "/b", messages.ErrorCode_NONE, false},
		{"back while it moves", 1, "/a", messages.ErrorCode_NONE, true},
		{"where it was last asked to go", 2, "/a", messages.ErrorCode_NONE, false},
		{"elsewhere than it was last asked to go", 2, "/b", messages.ErrorCode_NONE, true},
		{"an unknown dir", 0, "/nope", messages.ErrorCode_LOG_DIR_NOT_FOUND, false},
		{"no dir", 0, "", messages.ErrorCode_LOG_DIR_NOT_FOUND, false},
		{"an offline dir", 0, "/c", messages.ErrorCode_KAFKA_STORAGE_ERROR, false},
		{"a full dir", 0, "/d", messages.ErrorCode_KAFKA_STORAGE_ERROR, false},
		{"a draining dir", 0, "/e", messages.ErrorCode_INVALID_REQUEST, false},
		{"a partition not held", 9, "/b", messages.ErrorCode_NOT_LEADER_OR_FOLLOWER, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, msg, queue := moveAsked(dirs, running, asked, &messages.ReplicaMove{Topic: "t", Partition: c.partition, Dir: c.dir})
			require.Equal(t, c.code, code, msg)
			require.Equal(t, c.queue, queue)
			require.Equal(t, code == messages.ErrorCode_NONE, msg == "")
		})
	}
}

func TestAddFuture(t *testing.T) {
	dirs := func() []*messages.LogDirInfo {
		return []*messages.LogDirInfo{{Path: "/a"}, {Path: "/b"}}
	}
	moving := &messages.PartitionStatusResponse{Topic: "t", Partition: 3, LogDir: "/a", LogEndOffset: 100, MovingTo: "/b/", MoveFutureEndOffset: 60, MoveFutureBytes: 4096}
	got := dirs()
	addFuture(got, moving)
	require.Empty(t, got[0].Futures)
	require.Len(t, got[1].Futures, 1)
	require.True(t, proto.Equal(&messages.FutureLog{Topic: "t", Partition: 3, Bytes: 4096, OffsetLag: 40}, got[1].Futures[0]), "%v", got[1].Futures[0])

	for name, st := range map[string]*messages.PartitionStatusResponse{
		"not moving":        {Topic: "t", Partition: 3, LogDir: "/a", LogEndOffset: 100},
		"moving elsewhere":  {Topic: "t", Partition: 3, LogEndOffset: 100, MovingTo: "/z"},
		"an offline answer": {Topic: "t", Partition: 3, Error: messages.ErrorCode_KAFKA_STORAGE_ERROR, MovingTo: "/b"},
	} {
		got := dirs()
		addFuture(got, st)
		require.Empty(t, got[0].Futures, name)
		require.Empty(t, got[1].Futures, name)
	}
}
