package state

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/depot-dev/depot/messages"
	"github.com/depot-dev/depot/wire"
)

// epochs is a log's leader-epoch cache as the tests write it: entries of
// (epoch, start offset), and the log end offset.
type epochs struct {
	entries [][2]int64
	end     int64
}

// endOffsetFor answers as disk.Log.EndOffsetForEpoch does (Kafka's
// LeaderEpochFileCache.endOffsetFor): the latest epoch ends at the log
// end; an epoch above it is unknown; below the first, it ends where the
// first starts; otherwise the floor entry's epoch ends where the next
// starts.
func (e epochs) endOffsetFor(epoch int32) (int32, int64) {
	if len(e.entries) == 0 || epoch < 0 {
		return NoLeaderEpoch, -1
	}
	latest := e.entries[len(e.entries)-1][0]
	switch {
	case int64(epoch) == latest:
		return epoch, e.end
	case int64(epoch) > latest:
		return NoLeaderEpoch, -1
	case int64(epoch) < e.entries[0][0]:
		return epoch, e.entries[0][1]
	}
	for i := len(e.entries) - 2; i >= 0; i-- {
		if e.entries[i][0] <= int64(epoch) {
			return int32(e.entries[i][0]), e.entries[i+1][1]
		}
	}
	return NoLeaderEpoch, -1
}

// truncate cuts the cache as disk.Log.TruncateTo does.
func (e epochs) truncate(offset int64) epochs {
	out := epochs{end: min(e.end, offset)}
	for _, en := range e.entries {
		if en[1] < offset {
			out.entries = append(out.entries, en)
		}
	}
	return out
}

func (e epochs) latest() int32 {
	if len(e.entries) == 0 {
		return NoLeaderEpoch
	}
	return int32(e.entries[len(e.entries)-1][0])
}

// reconcile runs a follower's truncation against a leader to the end, as
// the fetcher drives it: ask for the follower's latest epoch, truncate,
// and ask again until done. It returns the follower's log afterwards.
func reconcile(t *testing.T, follower, leader epochs, followerHW int64) epochs {
	t.Helper()
	for range 10 {
		epoch, end := leader.endOffsetFor(follower.latest())
		offset, done := TruncationOffset(epoch, end, follower.endOffsetFor, follower.end, followerHW)
		follower = follower.truncate(offset)
		if done {
			return follower
		}
	}
	t.Fatal("truncation did not end")
	return follower
}

// TestTruncationKIP101 covers KIP-101's two scenarios, where truncating to
// the high watermark loses acknowledged data or leaves logs that diverge.
func TestTruncationKIP101(t *testing.T) {
	t.Run("scenario 1: a follower behind on the high watermark keeps what the leader has", func(t *testing.T) {
		// A leads epoch 0 with m0, m1; B has both but its high watermark
		// still says 1 when it restarts. Truncating to it would lose m1,
		// which A may lose next.
		a := epochs{entries: [][2]int64{{0, 0}}, end: 2}
		b := epochs{entries: [][2]int64{{0, 0}}, end: 2}
		got := reconcile(t, b, a, 1)
		require.Equal(t, int64(2), got.end)
	})
	t.Run("scenario 2: logs that diverged agree again", func(t *testing.T) {
		// A had m0, m1 in epoch 0, B only m0; both crashed, B came back
		// first and leads epoch 1, where it wrote m2 at offset 1. A, back
		// as a follower, must drop its m1.
		b := epochs{entries: [][2]int64{{0, 0}, {1, 1}}, end: 2}
		a := epochs{entries: [][2]int64{{0, 0}}, end: 2}
		got := reconcile(t, a, b, 2)
		require.Equal(t, int64(1), got.end, "m1 of epoch 0 goes: offset 1 holds epoch 1's m2 on the leader")
	})
}

// TestTruncationKIP279 covers KIP-279's cases, where the follower does not
// know the epoch the leader answers with, after fast leader changes and a
// double failure.
func TestTruncationKIP279(t *testing.T) {
	t.Run("the leader answers an epoch the follower never had", func(t *testing.T) {
		follower := epochs{entries: [][2]int64{{0, 0}, {2, 5}}, end: 10}
		leader := epochs{entries: [][2]int64{{0, 0}, {1, 3}, {3, 8}}, end: 12}
		epoch, end := leader.endOffsetFor(2)
		require.Equal(t, int32(1), epoch)
		require.Equal(t, int64(8), end)
		offset, done := TruncationOffset(epoch, end, follower.endOffsetFor, follower.end, 0)
		require.False(t, done, "the follower has no epoch 1: it cuts to the end of its epoch 0 and asks again")
		require.Equal(t, int64(5), offset)
		got := reconcile(t, follower, leader, 0)
		require.Equal(t, int64(3), got.end, "epoch 0 ends at 3 on the leader")
	})
	t.Run("double failure: the new leader lost the last epoch", func(t *testing.T) {
		// A and B had epoch 0 to offset 4; A led epoch 1 and wrote 4..6
		// unreplicated; both died; B came back, led epoch 2 from 4 and
		// wrote 4..9. A must drop its epoch 1 entirely.
		a := epochs{entries: [][2]int64{{0, 0}, {1, 4}}, end: 7}
		b := epochs{entries: [][2]int64{{0, 0}, {2, 4}}, end: 10}
		got := reconcile(t, a, b, 4)
		require.Equal(t, int64(4), got.end)
		require.Equal(t, int32(0), got.latest())
	})
	t.Run("a follower ahead in the leader's own epoch is cut to the leader's end", func(t *testing.T) {
		follower := epochs{entries: [][2]int64{{0, 0}, {3, 5}}, end: 20}
		leader := epochs{entries: [][2]int64{{0, 0}, {3, 5}, {4, 12}}, end: 15}
		got := reconcile(t, follower, leader, 0)
		require.Equal(t, int64(12), got.end)
	})
	t.Run("a follower behind the leader truncates nothing", func(t *testing.T) {
		follower := epochs{entries: [][2]int64{{0, 0}, {3, 5}}, end: 7}
		leader := epochs{entries: [][2]int64{{0, 0}, {3, 5}}, end: 15}
		got := reconcile(t, follower, leader, 0)
		require.Equal(t, int64(7), got.end)
	})
	t.Run("a leader with no epoch at or below the follower's: the high watermark", func(t *testing.T) {
		offset, done := TruncationOffset(NoLeaderEpoch, -1, epochs{entries: [][2]int64{{0, 0}}, end: 9}.endOffsetFor, 9, 6)
		require.True(t, done)
		require.Equal(t, int64(6), offset)
	})
}

// leaderOf3 is a partition led by node 1 with followers 2 and 3, all in
// the ISR, holding batches of 10 records.
func leaderOf3(t *testing.T, now time.Time, batches int) *Partition {
	t.Helper()
	p := NewPartition(1 << 20)
	p.SetReplica(1, []int32{1, 2, 3})
	p.Opened(0, 0, 0)
	require.Equal(t, AssignNewEpoch, p.Assign(Assignment{Leader: 1, LeaderEpoch: 4, PartitionEpoch: 7, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}}, now))
	require.Equal(t, Leader, p.Role())
	for i := range batches {
		h := wire.Header{BaseOffset: int64(i * 10), LastOffsetDelta: 9, ProducerID: -1}
		require.Zero(t, p.Appended(&h, 100), "nothing is readable before the followers have it")
	}
	return p
}

func TestLeaderHighWatermarkWaitsForTheISR(t *testing.T) {
	now := time.Unix(1000, 0)
	p := leaderOf3(t, now, 3)
	p.Flushed(30)
	require.Equal(t, int64(0), p.HighWatermark())

	require.Zero(t, p.FollowerFetch(2, 30, now))
	require.Equal(t, int64(0), p.HighWatermark(), "node 3 has not fetched")
	require.Equal(t, 100, p.FollowerFetch(3, 10, now), "the first batch is on every member")
	require.Equal(t, int64(10), p.HighWatermark())
	require.Equal(t, 200, p.FollowerFetch(3, 30, now))
	require.Equal(t, int64(30), p.HighWatermark())
	require.Equal(t, int64(30), p.AcknowledgedOffset())

	require.Zero(t, p.FollowerFetch(3, 40, now), "a fetch past the log end counts for nothing")
	require.Zero(t, p.FollowerFetch(9, 30, now), "nor one of a node that is not a replica")
	require.Zero(t, p.FollowerFetch(2, 20, now), "the high watermark never moves down")
	require.Equal(t, int64(30), p.HighWatermark())
}

// A leader whose high watermark lags the log end it took over with
// refuses the latest offset, and a timestamp's offset past the high
// watermark, with OFFSET_NOT_AVAILABLE (KIP-207) until its followers have
// fetched; then it answers them, and a timestamp's offset past the high
// watermark is -1.
func TestNewLeaderOffsetsNotAvailableUntilTheHighWatermarkCatchesUp(t *testing.T) {
	now := time.Unix(1000, 0)
	p := NewPartition(1 << 20)
	p.SetReplica(2, []int32{1, 2, 3})
	p.Opened(0, 30, 30)
	require.Equal(t, AssignNewEpoch, p.Assign(Assignment{Leader: 1, LeaderEpoch: 4, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}}, now))
	require.False(t, p.Lagging(), "a follower answers no ListOffsets")
	p.LeaderHighWatermark(20)

	require.Equal(t, AssignNewEpoch, p.Assign(Assignment{Leader: 2, LeaderEpoch: 5, Replicas: []int32{1, 2, 3}, ISR: []int32{2, 3}}, now))
	require.True(t, p.Lagging())
	_, ok, refusal := p.ListOffset(-1)
	require.True(t, ok)
	require.Equal(t, messages.ErrorCode_OFFSET_NOT_AVAILABLE, refusal.Code, refusal.Message)
	offset, ok, refusal := p.ListOffset(-2)
	require.True(t, ok)
	require.False(t, refusal.Refused(), "the earliest offset does not wait")
	require.Equal(t, int64(0), offset)
	offset, refusal = p.TimestampOffset(10)
	require.False(t, refusal.Refused())
	require.Equal(t, int64(10), offset, "below the high watermark")
	_, refusal = p.TimestampOffset(25)
	require.Equal(t, messages.ErrorCode_OFFSET_NOT_AVAILABLE, refusal.Code)

	p.FollowerFetch(3, 30, now)
	require.False(t, p.Lagging())
	offset, _, refusal = p.ListOffset(-1)
	require.False(t, refusal.Refused())
	require.Equal(t, int64(30), offset)
	h := wire.Header{BaseOffset: 30, LastOffsetDelta: 9, ProducerID: -1}
	p.Appended(&h, 100)
	offset, refusal = p.TimestampOffset(35)
	require.False(t, refusal.Refused())
	require.Equal(t, int64(-1), offset, "not readable yet")
}

func TestISRShrinksAfterTheLagTimeAndExpandsOnceCaughtUp(t *testing.T) {
	now := time.Unix(1000, 0)
	lag := 10 * time.Second
	p := leaderOf3(t, now, 2)
	p.FollowerFetch(2, 20, now)
	p.FollowerFetch(3, 20, now)
	_, ok := p.ISRProposal(now.Add(lag), lag)
	require.False(t, ok, "both followers are caught up")

	// Node 3 stops fetching while node 2 keeps up with new batches.
	h := wire.Header{BaseOffset: 20, LastOffsetDelta: 9, ProducerID: -1}
	p.Appended(&h, 100)
	later := now.Add(lag + time.Millisecond)
	p.FollowerFetch(2, 30, later)
	require.Equal(t, int64(20), p.HighWatermark(), "node 3 holds the high watermark back")
	isr, ok := p.ISRProposal(later, lag)
	require.True(t, ok)
	require.Equal(t, []int32{1, 2}, isr)
	_, ok = p.ISRProposal(later, lag)
	require.False(t, ok, "one change at a time")
	p.FollowerFetch(2, 30, later)
	require.Equal(t, int64(20), p.HighWatermark(), "until the shrink is committed, node 3 still counts")

	require.Equal(t, AssignSame, p.Assign(Assignment{Leader: 1, LeaderEpoch: 4, PartitionEpoch: 8, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2}}, later))
	require.Equal(t, int64(30), p.HighWatermark())
	require.False(t, p.ISRPending())
	require.False(t, p.EnoughReplicas(3))
	require.True(t, p.EnoughReplicas(2))

	_, ok = p.ISRProposal(later, lag)
	require.False(t, ok, "a member that left must fetch again before it may join")

	// Node 3 fetches again and reaches the log end: it may join.
	p.FollowerFetch(3, 20, later)
	_, ok = p.ISRProposal(later, lag)
	require.False(t, ok, "below the high watermark it does not join")
	p.FollowerFetch(3, 30, later)
	isr, ok = p.ISRProposal(later, lag)
	require.True(t, ok)
	require.ElementsMatch(t, []int32{1, 2, 3}, isr)
}

func TestStaleAssignmentsAreIgnored(t *testing.T) {
	now := time.Unix(1000, 0)
	p := leaderOf3(t, now, 1)
	require.Equal(t, AssignStale, p.Assign(Assignment{Leader: 2, LeaderEpoch: 3, PartitionEpoch: 9, Replicas: []int32{1, 2, 3}, ISR: []int32{2}}, now))
	require.Equal(t, AssignStale, p.Assign(Assignment{Leader: 1, LeaderEpoch: 4, PartitionEpoch: 6, Replicas: []int32{1, 2, 3}, ISR: []int32{1}}, now))
	require.Equal(t, Leader, p.Role())
	require.Equal(t, []int32{1, 2, 3}, p.ISR())
}

func TestFollowerTakesTheLeadersHighWatermark(t *testing.T) {
	now := time.Unix(1000, 0)
	p := NewPartition(1 << 20)
	p.SetReplica(2, []int32{1, 2})
	p.Opened(0, 0, 0)
	require.Equal(t, AssignNewEpoch, p.Assign(Assignment{Leader: 1, LeaderEpoch: 0, Replicas: []int32{1, 2}, ISR: []int32{1, 2}}, now))
	require.Equal(t, Follower, p.Role())
	for i := range 3 {
		h := wire.Header{BaseOffset: int64(i * 10), LastOffsetDelta: 9, ProducerID: -1}
		require.Zero(t, p.Appended(&h, 50))
	}
	require.Equal(t, int64(0), p.HighWatermark())
	require.Equal(t, 100, p.LeaderHighWatermark(20))
	require.Equal(t, 50, p.LeaderHighWatermark(90), "never past its own log end")
	require.Equal(t, int64(30), p.HighWatermark())

	p.Truncated(10)
	require.Equal(t, int64(10), p.LogEndOffset())
	require.Equal(t, int64(10), p.HighWatermark())

	// Leading after following: the high watermark it had stays.
	require.Equal(t, AssignNewEpoch, p.Assign(Assignment{Leader: 2, LeaderEpoch: 1, Replicas: []int32{1, 2}, ISR: []int32{2}}, now))
	require.Equal(t, Leader, p.Role())
	require.Equal(t, int64(10), p.HighWatermark())
}

func TestAloneReplicaIsItsOwnISR(t *testing.T) {
	p := NewPartition(1 << 20)
	p.SetReplica(1, []int32{1})
	p.Opened(0, 5, 5)
	require.Equal(t, int64(5), p.HighWatermark())
	p.Assign(Assignment{Leader: 1, LeaderEpoch: 0, Replicas: []int32{1}, ISR: []int32{1}}, time.Now())
	require.Equal(t, Alone, p.Role())
	h := wire.Header{BaseOffset: 5, LastOffsetDelta: 4, ProducerID: -1}
	require.Equal(t, 70, p.Appended(&h, 70))
	require.Equal(t, int64(10), p.HighWatermark())
	require.True(t, p.EnoughReplicas(1))
	require.False(t, p.EnoughReplicas(2))
}
