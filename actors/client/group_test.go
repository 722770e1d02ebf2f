package client

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/depot-dev/depot/messages"
)

// groupSetup starts a fake cluster with a fake group coordinator, a client,
// and the topic "orders" with the given partitions.
func groupSetup(t *testing.T, partitions int) (*fakeCluster, *fakeGroups, *Client) {
	t.Helper()
	fc, c := setup(t)
	fg := newFakeGroups(t, fc)
	require.NoError(t, fc.createTopic("orders", partitions))
	return fc, fg, c
}

// produceTo writes n records to one partition of topic, values
// "p<partition>-<i>" for i from first.
func produceTo(t *testing.T, ctx context.Context, c *Client, topic string, partition int32, first, n int) {
	t.Helper()
	p, err := c.NewProducer(WithPartitioner(ManualPartitioner()), Linger(0))
	require.NoError(t, err)
	defer p.Close()
	errs := make(chan error, n)
	for i := first; i < first+n; i++ {
		p.Produce(ctx, &Record{Topic: topic, Partition: partition, Value: []byte(fmt.Sprintf("p%d-%d", partition, i))}, func(_ *Record, err error) { errs <- err })
	}
	require.NoError(t, p.Flush(ctx))
	for range n {
		require.NoError(t, <-errs)
	}
}

// pollN polls until at least n records came.
func pollN(t *testing.T, ctx context.Context, g *GroupConsumer, n int) []*Record {
	t.Helper()
	var out []*Record
	for len(out) < n {
		rs, err := g.Poll(ctx)
		require.NoError(t, err, "after %d of %d records", len(out), n)
		out = append(out, rs...)
	}
	return out
}

// offsetsByPartition lists the offsets of records per partition, in order.
func offsetsByPartition(records []*Record) map[int32][]int64 {
	out := map[int32][]int64{}
	for _, r := range records {
		out[r.Partition] = append(out[r.Partition], r.Offset)
	}
	return out
}

// span is the offsets from first to end, exclusive.
func span(first, end int64) []int64 {
	var out []int64
	for o := first; o < end; o++ {
		out = append(out, o)
	}
	return out
}

// nothingMore checks that Poll returns no record within a short wait.
func nothingMore(t *testing.T, ctx context.Context, g *GroupConsumer) {
	t.Helper()
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	rs, err := g.Poll(short)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Empty(t, rs)
}

func tp(p int32) TopicPartition { return TopicPartition{"orders", p} }

func TestGroupJoinStartsAtCommittedOffsets(t *testing.T) {
	_, fg, c := groupSetup(t, 3)
	ctx := testContext(t, 20*time.Second)
	for p := range int32(3) {
		produceTo(t, ctx, c, "orders", p, 0, 10)
	}
	require.NoError(t, c.AlterGroupOffsets(ctx, "g", map[TopicPartition]int64{tp(0): 4}))
	var assigned [][]TopicPartition
	g, err := c.NewGroupConsumer("g", []string{"orders"}, ResetOffset(ResetEarliest), AutoCommit(0),
		OnAssigned(func(_ context.Context, tps []TopicPartition) { assigned = append(assigned, tps) }))
	require.NoError(t, err)

	got := offsetsByPartition(pollN(t, ctx, g, 26))
	require.Equal(t, map[int32][]int64{0: span(4, 10), 1: span(0, 10), 2: span(0, 10)}, got)
	nothingMore(t, ctx, g)
	require.Equal(t, [][]TopicPartition{{tp(0), tp(1), tp(2)}}, assigned)
	require.Equal(t, []TopicPartition{tp(0), tp(1), tp(2)}, g.Assigned())
	require.Equal(t, "member-1", g.MemberID())
	require.Equal(t, int32(1), g.Generation())
	fg.with("g", func(gr *fakeGroup) {
		require.Len(t, gr.joins, 1)
		j := gr.joins[0]
		require.Equal(t, []string{"orders"}, j.GetTopics())
		require.Equal(t, []string{AssignorCooperativeSticky, AssignorRange}, j.GetAssignors())
		require.Equal(t, int32(10000), j.GetSessionTimeoutMs())
		require.Equal(t, int32(30000), j.GetRebalanceTimeoutMs())
		require.Empty(t, j.GetMemberId())
		require.Empty(t, j.GetOwned())
	})

	require.NoError(t, g.CommitSync(ctx))
	require.Equal(t, map[TopicPartition]int64{tp(0): 10, tp(1): 10, tp(2): 10}, fg.committed("g"))
	committed, err := c.CommittedOffsets(ctx, "g")
	require.NoError(t, err)
	require.Equal(t, fg.committed("g"), committed)

	g.Close()
	fg.with("g", func(gr *fakeGroup) {
		require.Len(t, gr.leaves, 1)
		require.Equal(t, "member-1", gr.leaves[0].GetMemberId())
	})
	_, err = g.Poll(ctx)
	require.ErrorIs(t, err, ErrClosed)
}

// With nothing committed, the reset policy decides; the resolved position
// is what a commit records, so a restart does not skip what came since.
func TestGroupResetPolicy(t *testing.T) {
	for _, tc := range []struct {
		name  string
		reset ResetPolicy
		first int64
	}{
		{"earliest", ResetEarliest, 0},
		{"latest", ResetLatest, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, fg, c := groupSetup(t, 1)
			ctx := testContext(t, 20*time.Second)
			produceTo(t, ctx, c, "orders", 0, 0, 10)
			g, err := c.NewGroupConsumer("g", []string{"orders"}, ResetOffset(tc.reset), AutoCommit(0))
			require.NoError(t, err)
			defer g.Close()
			if tc.reset == ResetLatest {
				nothingMore(t, ctx, g) // joins and resolves the end
				require.NoError(t, g.CommitSync(ctx))
				require.Equal(t, map[TopicPartition]int64{tp(0): 10}, fg.committed("g"))
			}
			produceTo(t, ctx, c, "orders", 0, 10, 5)
			got := offsetsByPartition(pollN(t, ctx, g, 15-int(tc.first)))
			require.Equal(t, span(tc.first, 15), got[0])
		})
	}
	t.Run("none", func(t *testing.T) {
		_, _, c := groupSetup(t, 1)
		ctx := testContext(t, 10*time.Second)
		g, err := c.NewGroupConsumer("g", []string{"orders"}, ResetOffset(ResetNone))
		require.NoError(t, err)
		defer g.Close()
		_, err = g.Poll(ctx)
		require.ErrorIs(t, err, ErrNoOffset)
	})
}

// A cooperative rebalance takes one partition away: fetching it stops, its
// prefetched records are dropped, its position is committed, OnRevoked
// runs, and the member joins again owning the rest.
func TestGroupCooperativeRevoke(t *testing.T) {
	_, fg, c := groupSetup(t, 2)
	ctx := testContext(t, 20*time.Second)
	events := &eventLog{}
	fg.events = events
	var rebalancing atomic.Bool
	var rebalanceAnswers atomic.Int32
	fg.with("g", func(gr *fakeGroup) {
		gr.heartbeat = func(*messages.HeartbeatRequest) (messages.ErrorCode, bool) {
			if rebalancing.Load() {
				rebalanceAnswers.Add(1)
				return messages.ErrorCode_REBALANCE_IN_PROGRESS, false
			}
			return messages.ErrorCode_NONE, false
		}
		gr.join = func(gr *fakeGroup, req *messages.JoinGroupRequest) *messages.JoinGroupResponse {
			resp := &messages.JoinGroupResponse{MemberId: "m", Assignor: AssignorCooperativeSticky, Generation: int32(len(gr.joins))}
			switch len(gr.joins) {
			case 1:
				resp.Assignment = assignment("orders", 0, 1)
			case 2:
				rebalancing.Store(false)
				resp.Assignment, resp.Rejoin = assignment("orders", 0), true
			default:
				resp.Assignment = assignment("orders", 0)
			}
			return resp
		}
	})
	g, err := c.NewGroupConsumer("g", []string{"orders"}, ResetOffset(ResetEarliest), AutoCommit(time.Hour), HeartbeatInterval(20*time.Millisecond),
		OnAssigned(func(_ context.Context, tps []TopicPartition) { events.add("assigned %v", tps) }),
		OnRevoked(func(_ context.Context, tps []TopicPartition) { events.add("revoked %v", tps) }),
		OnLost(func(_ context.Context, tps []TopicPartition) { events.add("lost %v", tps) }))
	require.NoError(t, err)
	defer g.Close()
	produceTo(t, ctx, c, "orders", 0, 0, 10)
	produceTo(t, ctx, c, "orders", 1, 0, 10)
	require.Equal(t, map[int32][]int64{0: span(0, 10), 1: span(0, 10)}, offsetsByPartition(pollN(t, ctx, g, 20)))

	// More records of partition 1 arrive in the prefetch buffer, unreturned.
	produceTo(t, ctx, c, "orders", 1, 10, 10)
	produceTo(t, ctx, c, "orders", 0, 10, 5)
	require.Eventually(t, func() bool {
		g.cons.mu.Lock()
		defer g.cons.mu.Unlock()
		for _, f := range g.cons.ready {
			if f.partition == 1 {
				return true
			}
		}
		return false
	}, 10*time.Second, time.Millisecond)
	rebalancing.Store(true)
	require.Eventually(t, func() bool { return rebalanceAnswers.Load() > 0 && g.interrupted() }, 10*time.Second, time.Millisecond)

	var after []*Record
	for len(after) < 5 {
		rs, err := g.Poll(ctx)
		require.NoError(t, err)
		for _, r := range rs {
			require.Equal(t, int32(0), r.Partition, "a record of the revoked partition: %d/%d", r.Partition, r.Offset)
		}
		after = append(after, rs...)
	}
	require.Equal(t, span(10, 15), offsetsByPartition(after)[0])
	produceTo(t, ctx, c, "orders", 1, 20, 5)
	nothingMore(t, ctx, g)

	require.Equal(t, []string{
		"join []", "assigned [orders-0 orders-1]",
		"join [orders-0 orders-1]", "revoked [orders-1]",
		"join [orders-0]",
	}, events.list())
	require.Equal(t, []TopicPartition{tp(0)}, g.Assigned())
	require.Equal(t, int32(3), g.Generation())
	fg.with("g", func(gr *fakeGroup) {
		require.Len(t, gr.commits, 1, "only the revoked partition is committed")
		require.Equal(t, int32(2), gr.commits[0].GetGeneration())
		require.Equal(t, "m", gr.commits[0].GetMemberId())
		require.Len(t, gr.commits[0].GetOffsets(), 1)
		o := gr.commits[0].GetOffsets()[0]
		require.Equal(t, TopicPartition{o.GetTopic(), o.GetPartition()}, tp(1))
		require.Equal(t, int64(10), o.GetOffset(), "the position after the records returned, not after those prefetched")
	})
}

// With an eager assignor every partition is given up, committed and
// revoked before the member joins again.
func TestGroupEagerRevokesBeforeJoin(t *testing.T) {
	_, fg, c := groupSetup(t, 2)
	ctx := testContext(t, 20*time.Second)
	events := &eventLog{}
	fg.events = events
	var rebalancing atomic.Bool
	fg.with("g", func(gr *fakeGroup) {
		gr.heartbeat = func(*messages.HeartbeatRequest) (messages.ErrorCode, bool) {
			if rebalancing.Load() {
				return messages.ErrorCode_REBALANCE_IN_PROGRESS, false
			}
			return messages.ErrorCode_NONE, false
		}
		gr.join = func(gr *fakeGroup, req *messages.JoinGroupRequest) *messages.JoinGroupResponse {
			rebalancing.Store(false)
			return &messages.JoinGroupResponse{MemberId: "m", Assignor: AssignorRange, Generation: int32(len(gr.joins)), Assignment: assignment("orders", 0, 1)}
		}
	})
	g, err := c.NewGroupConsumer("g", []string{"orders"}, Assignors(AssignorRange), ResetOffset(ResetEarliest), HeartbeatInterval(20*time.Millisecond),
		OnAssigned(func(_ context.Context, tps []TopicPartition) { events.add("assigned %v", tps) }),
		OnRevoked(func(_ context.Context, tps []TopicPartition) { events.add("revoked %v", tps) }))
	require.NoError(t, err)
	defer g.Close()
	produceTo(t, ctx, c, "orders", 0, 0, 10)
	produceTo(t, ctx, c, "orders", 1, 0, 10)
	pollN(t, ctx, g, 20)
	rebalancing.Store(true)
	require.Eventually(t, g.interrupted, 10*time.Second, time.Millisecond)
	produceTo(t, ctx, c, "orders", 1, 10, 3)
	got := offsetsByPartition(pollN(t, ctx, g, 3))
	require.Equal(t, map[int32][]int64{1: span(10, 13)}, got, "resumed at the committed offsets")
	require.Equal(t, []string{
		"join []", "assigned [orders-0 orders-1]",
		"revoked [orders-0 orders-1]", "join []", "assigned [orders-0 orders-1]",
	}, events.list())
	fg.with("g", func(gr *fakeGroup) {
		require.Len(t, gr.commits, 1)
		require.Equal(t, int32(1), gr.commits[0].GetGeneration(), "committed in the old generation, before joining")
		require.Len(t, gr.commits[0].GetOffsets(), 2)
	})
}

// A member dropped by the group loses its partitions: no commit, OnLost,
// then a new join; what was returned and not committed comes again.
func TestGroupLost(t *testing.T) {
	for _, tc := range []struct {
		name       string
		code       messages.ErrorCode
		drop       bool
		keepMember bool
	}{
		{"unknown member", messages.ErrorCode_UNKNOWN_MEMBER_ID, false, false},
		{"illegal generation", messages.ErrorCode_ILLEGAL_GENERATION, false, true},
		{"session expired", messages.ErrorCode_NONE, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, fg, c := groupSetup(t, 2)
			ctx := testContext(t, 20*time.Second)
			events := &eventLog{}
			var failing atomic.Bool
			fg.with("g", func(gr *fakeGroup) {
				gr.heartbeat = func(*messages.HeartbeatRequest) (messages.ErrorCode, bool) {
					if failing.Load() {
						return tc.code, tc.drop
					}
					return messages.ErrorCode_NONE, false
				}
			})
			g, err := c.NewGroupConsumer("g", []string{"orders"}, ResetOffset(ResetEarliest), AutoCommit(time.Hour),
				HeartbeatInterval(20*time.Millisecond), SessionTimeout(400*time.Millisecond),
				OnAssigned(func(_ context.Context, tps []TopicPartition) { events.add("assigned %v", tps) }),
				OnRevoked(func(_ context.Context, tps []TopicPartition) { events.add("revoked %v", tps) }),
				OnLost(func(_ context.Context, tps []TopicPartition) {
					events.add("lost %v", tps)
					failing.Store(false)
				}))
			require.NoError(t, err)
			defer g.Close()
			produceTo(t, ctx, c, "orders", 0, 0, 10)
			produceTo(t, ctx, c, "orders", 1, 0, 10)
			pollN(t, ctx, g, 20)
			require.NoError(t, g.CommitSync(ctx))
			produceTo(t, ctx, c, "orders", 0, 10, 5)
			pollN(t, ctx, g, 5)

			failing.Store(true)
			require.Eventually(t, g.interrupted, 10*time.Second, time.Millisecond)
			got := offsetsByPartition(pollN(t, ctx, g, 5))
			require.Equal(t, map[int32][]int64{0: span(10, 15)}, got, "returned but uncommitted records come again")
			require.Equal(t, []string{"assigned [orders-0 orders-1]", "lost [orders-0 orders-1]", "assigned [orders-0 orders-1]"}, events.list())
			fg.with("g", func(gr *fakeGroup) {
				require.Len(t, gr.commits, 1, "nothing committed for lost partitions")
				require.Len(t, gr.joins, 2)
				if tc.keepMember {
					require.Equal(t, "member-1", gr.joins[1].GetMemberId())
				} else {
					require.Empty(t, gr.joins[1].GetMemberId())
				}
			})
		})
	}
}

// Auto-commit runs inside Poll once the interval has passed, commits only
// what was returned, and Close commits the rest.
func TestGroupAutoCommit(t *testing.T) {
	t.Run("interval", func(t *testing.T) {
		const interval = 300 * time.Millisecond
		_, fg, c := groupSetup(t, 1)
		ctx := testContext(t, 20*time.Second)
		produceTo(t, ctx, c, "orders", 0, 0, 10)
		g, err := c.NewGroupConsumer("g", []string{"orders"}, ResetOffset(ResetEarliest), AutoCommit(interval))
		require.NoError(t, err)
		started := time.Now()
		pollN(t, ctx, g, 10)
		if time.Since(started) < interval {
			require.Empty(t, fg.committed("g"), "committed before the interval")
		}
		for len(fg.committed("g")) == 0 {
			nothingMore(t, ctx, g)
		}
		require.GreaterOrEqual(t, time.Since(started), interval)
		require.Equal(t, map[TopicPartition]int64{tp(0): 10}, fg.committed("g"))

		produceTo(t, ctx, c, "orders", 0, 10, 5)
		pollN(t, ctx, g, 5)
		for fg.committed("g")[tp(0)] != 15 {
			nothingMore(t, ctx, g)
		}
		produceTo(t, ctx, c, "orders", 0, 15, 3)
		pollN(t, ctx, g, 3)
		g.Close()
		require.Equal(t, map[TopicPartition]int64{tp(0): 18}, fg.committed("g"))
		fg.with("g", func(gr *fakeGroup) {
			require.Len(t, gr.commits, 3, "no commit when nothing moved")
		})
	})
	t.Run("off", func(t *testing.T) {
		_, fg, c := groupSetup(t, 1)
		ctx := testContext(t, 20*time.Second)
		produceTo(t, ctx, c, "orders", 0, 0, 10)
		g, err := c.NewGroupConsumer("g", []string{"orders"}, ResetOffset(ResetEarliest), AutoCommit(0))
		require.NoError(t, err)
		pollN(t, ctx, g, 10)
		nothingMore(t, ctx, g)
		g.Close()
		fg.with("g", func(gr *fakeGroup) { require.Empty(t, gr.commits) })
	})
}

// A consumer that stops after committing part of what it read is followed
// by one that starts at the commit: nothing is skipped, and only what was
// not committed comes twice.
func TestGroupAtLeastOnceAcrossRestart(t *testing.T) {
	_, fg, c := groupSetup(t, 2)
	ctx := testContext(t, 20*time.Second)
	produceTo(t, ctx, c, "orders", 0, 0, 20)
	produceTo(t, ctx, c, "orders", 1, 0, 20)

	first, err := c.NewGroupConsumer("g", []string{"orders"}, ResetOffset(ResetEarliest), AutoCommit(0))
	require.NoError(t, err)
	seen := map[string]int{}
	for _, r := range pollN(t, ctx, first, 40) {
		seen[string(r.Value)]++
	}
	require.NoError(t, first.CommitSync(ctx))
	committed := fg.committed("g")
	require.Equal(t, map[TopicPartition]int64{tp(0): 20, tp(1): 20}, committed)
	produceTo(t, ctx, c, "orders", 0, 20, 7)
	for _, r := range pollN(t, ctx, first, 7) {
		seen[string(r.Value)]++
	}
	first.Close() // no auto-commit: 20-26 of partition 0 are read but not committed

	produceTo(t, ctx, c, "orders", 1, 20, 4)
	second, err := c.NewGroupConsumer("g", []string{"orders"}, ResetOffset(ResetLatest), AutoCommit(0))
	require.NoError(t, err)
	defer second.Close()
	got := pollN(t, ctx, second, 11)
	require.Equal(t, map[int32][]int64{0: span(20, 27), 1: span(20, 24)}, offsetsByPartition(got))
	for _, r := range got {
		seen[string(r.Value)]++
	}
	nothingMore(t, ctx, second)
	for p := range 2 {
		for i := range 27 {
			if p == 1 && i >= 24 {
				continue
			}
			v := fmt.Sprintf("p%d-%d", p, i)
			require.Positive(t, seen[v], "%s never consumed", v)
			if p == 0 && i >= 20 {
				require.Equal(t, 2, seen[v], "%s was not committed: consumed again", v)
			} else {
				require.Equal(t, 1, seen[v], "%s", v)
			}
		}
	}
}

// A member whose partitions were all fetched ahead gets them a Poll at a
// time (at most MaxPollRecords, 500 by default): after two Polls and a
// commit, more is left to read. When one Poll returned everything fetched,
// how much came before the commit depended on how many fetches had been
// answered when Poll looked, and a reader wanting more after it could wait
// for records that were never to come.
func TestGroupPollAfterCommitReadsOnFromPrefetched(t *testing.T) {
	const partitions, each = 4, 500
	fc, fg, c := groupSetup(t, partitions)
	ctx := testContext(t, 20*time.Second)
	for p := range int32(partitions) {
		produceTo(t, ctx, c, "orders", p, 0, each)
	}
	g, err := c.NewGroupConsumer("g", []string{"orders"}, ResetOffset(ResetEarliest), AutoCommit(0), FetchMaxWait(10*time.Second))
	require.NoError(t, err)
	defer g.Close()
	poll := func() []*Record {
		t.Helper()
		rs, err := g.Poll(ctx)
		require.NoError(t, err)
		require.NotEmpty(t, rs)
		require.LessOrEqual(t, len(rs), 500)
		return rs
	}
	read := poll() // joins and starts fetching
	waitPrefetched(t, fc, "orders", partitions)
	read = append(read, poll()...)
	require.NoError(t, g.CommitSync(ctx))
	want := map[TopicPartition]int64{tp(0): 0, tp(1): 0, tp(2): 0, tp(3): 0}
	for _, r := range read {
		want[tp(r.Partition)] = r.Offset + 1
	}
	require.Equal(t, want, fg.committed("g"))
	// The rest of what was fetched is left for the Polls after the commit.
	for after := len(read) + 500; len(read) < after; {
		read = append(read, poll()...)
	}
	for len(read) < partitions*each {
		read = append(read, poll()...)
	}
	require.Len(t, read, partitions*each)
	got := offsetsByPartition(read)
	for p := range int32(partitions) {
		require.Equal(t, span(0, each), got[p], "partition %d", p)
	}
	nothingMore(t, ctx, g)
}

// NOT_COORDINATOR sends the client to find the coordinator again.
func TestGroupCoordinatorMoved(t *testing.T) {
	_, fg, c := groupSetup(t, 1)
	ctx := testContext(t, 20*time.Second)
	produceTo(t, ctx, c, "orders", 0, 0, 3)
	fg.with("g", func(gr *fakeGroup) { gr.notCoordinator = 2 })
	g, err := c.NewGroupConsumer("g", []string{"orders"}, ResetOffset(ResetEarliest), AutoCommit(0), HeartbeatInterval(20*time.Millisecond))
	require.NoError(t, err)
	defer g.Close()
	pollN(t, ctx, g, 3)
	fg.mu.Lock()
	finds := fg.finds
	fg.mu.Unlock()
	require.Equal(t, 3, finds)

	// A heartbeat told NOT_COORDINATOR also finds it again.
	fg.with("g", func(gr *fakeGroup) { gr.notCoordinator = 1 })
	require.Eventually(t, func() bool {
		fg.mu.Lock()
		defer fg.mu.Unlock()
		return fg.finds > finds && fg.groups["g"].notCoordinator == 0
	}, 10*time.Second, time.Millisecond)
	require.NoError(t, g.CommitSync(ctx))
	require.Equal(t, map[TopicPartition]int64{tp(0): 3}, fg.committed("g"))
}

// A static member names its instance in joins and heartbeats and does not
// leave on Close.
func TestGroupStaticMember(t *testing.T) {
	_, fg, c := groupSetup(t, 1)
	ctx := testContext(t, 20*time.Second)
	var instances atomic.Value
	fg.with("g", func(gr *fakeGroup) {
		gr.heartbeat = func(req *messages.HeartbeatRequest) (messages.ErrorCode, bool) {
			instances.Store(req.GetGroupInstanceId())
			return messages.ErrorCode_NONE, false
		}
	})
	g, err := c.NewGroupConsumer("g", []string{"orders"}, InstanceID("host-1"), HeartbeatInterval(20*time.Millisecond))
	require.NoError(t, err)
	nothingMore(t, ctx, g)
	require.Eventually(t, func() bool { return instances.Load() == "host-1" }, 10*time.Second, time.Millisecond)
	g.Close()
	fg.with("g", func(gr *fakeGroup) {
		require.Equal(t, "host-1", gr.joins[0].GetGroupInstanceId())
		require.Empty(t, gr.leaves)
		require.Len(t, gr.commits, 1, "auto-commit on close")
	})
}

func TestGroupAdmin(t *testing.T) {
	_, fg, c := groupSetup(t, 2)
	ctx := testContext(t, 20*time.Second)
	produceTo(t, ctx, c, "orders", 0, 0, 4)

	groups, err := c.ListGroups(ctx)
	require.NoError(t, err)
	require.Empty(t, groups)
	_, err = c.DescribeGroup(ctx, "nope")
	require.ErrorIs(t, err, ErrGroupIDNotFound)
	require.ErrorIs(t, c.DeleteGroup(ctx, "nope"), ErrGroupIDNotFound)
	for _, err := range []error{
		func() error { _, err := c.DescribeGroup(ctx, ""); return err }(),
		c.DeleteGroup(ctx, ""),
		c.AlterGroupOffsets(ctx, "", nil),
		func() error { _, err := c.CommittedOffsets(ctx, ""); return err }(),
		func() error { _, err := c.NewGroupConsumer("", []string{"orders"}); return err }(),
	} {
		require.ErrorIs(t, err, ErrInvalidGroupID)
	}

	g, err := c.NewGroupConsumer("active", []string{"orders"}, ResetOffset(ResetEarliest))
	require.NoError(t, err)
	pollN(t, ctx, g, 4)
	require.NoError(t, c.AlterGroupOffsets(ctx, "idle", map[TopicPartition]int64{tp(0): 2, tp(1): 0}))

	groups, err = c.ListGroups(ctx)
	require.NoError(t, err)
	require.Len(t, groups, 2)
	require.Equal(t, "active", groups[0].GetGroupId())
	require.Equal(t, "Stable", groups[0].GetState())
	require.Equal(t, int32(1), groups[0].GetMembers())
	require.Equal(t, "idle", groups[1].GetGroupId())
	require.Equal(t, "Empty", groups[1].GetState())

	d, err := c.DescribeGroup(ctx, "active")
	require.NoError(t, err)
	require.Equal(t, "Stable", d.GetState())
	require.Len(t, d.GetMembers(), 1)
	require.Len(t, d.GetMembers()[0].GetAssignment(), 2)

	err = c.AlterGroupOffsets(ctx, "active", map[TopicPartition]int64{tp(0): 0})
	require.ErrorIs(t, err, ErrNonEmptyGroup)
	require.ErrorIs(t, c.DeleteGroup(ctx, "active"), ErrNonEmptyGroup)

	committed, err := c.CommittedOffsets(ctx, "idle")
	require.NoError(t, err)
	require.Equal(t, map[TopicPartition]int64{tp(0): 2, tp(1): 0}, committed)
	require.NoError(t, c.DeleteGroup(ctx, "idle"))
	committed, err = c.CommittedOffsets(ctx, "idle")
	require.NoError(t, err)
	require.Empty(t, committed)

	g.Close()
	require.Equal(t, map[TopicPartition]int64{tp(0): 4, tp(1): 0}, fg.committed("active"))
	require.NoError(t, c.DeleteGroup(ctx, "active"))
}

func TestNewGroupConsumerRefusesBadOptions(t *testing.T) {
	_, _, c := groupSetup(t, 1)
	for _, tc := range []struct {
		name   string
		topics []string
		opts   []GroupOpt
		want   string
	}{
		{"no topics", nil, nil, "needs topics"},
		{"empty topic", []string{""}, nil, "needs topics"},
		{"heartbeat not below session", []string{"orders"}, []GroupOpt{SessionTimeout(time.Second), HeartbeatInterval(time.Second)}, "below the session timeout"},
		{"negative auto-commit", []string{"orders"}, []GroupOpt{AutoCommit(-time.Second)}, "positive"},
		{"no assignors", []string{"orders"}, []GroupOpt{Assignors()}, "assignors"},
		{"bad consumer option", []string{"orders"}, []GroupOpt{FetchMaxBytes(0)}, "positive"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.NewGroupConsumer("g", tc.topics, tc.opts...)
			require.Error(t, err)
			require.True(t, strings.Contains(err.Error(), tc.want), err.Error())
		})
	}
}

// A client closed under a group consumer stops its heartbeats: the
// consumer sends no more, and its heartbeat goroutine ends, where it went
// on asking the coordinator every interval until the process exited.
func TestGroupHeartbeatsStopWithTheClient(t *testing.T) {
	_, fg, c := groupSetup(t, 1)
	ctx := testContext(t, 20*time.Second)
	produceTo(t, ctx, c, "orders", 0, 0, 5)
	g, err := c.NewGroupConsumer("g", []string{"orders"}, ResetOffset(ResetEarliest), AutoCommit(0),
		HeartbeatInterval(20*time.Millisecond), SessionTimeout(time.Second))
	require.NoError(t, err)
	defer g.Close()
	pollN(t, ctx, g, 5)
	heartbeats := func() int {
		var n int
		fg.with("g", func(fg *fakeGroup) { n = fg.heartbeats })
		return n
	}
	require.Eventually(t, func() bool { return heartbeats() > 0 }, 5*time.Second, 5*time.Millisecond, "no heartbeat")

	c.Close()
	select {
	case <-g.heartbeatDone:
	case <-time.After(promptly):
		t.Fatalf("heartbeats still sent %v after the client closed", promptly)
	}
	sent := heartbeats()
	time.Sleep(200 * time.Millisecond) // ten heartbeat intervals
	require.Equal(t, sent, heartbeats(), "heartbeats after the client closed")
}
