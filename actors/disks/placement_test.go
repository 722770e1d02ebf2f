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
