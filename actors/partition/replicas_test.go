package partition

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"

	"github.com/depot-dev/depot/actors"
	"github.com/depot-dev/depot/actors/actortest"
	"github.com/depot-dev/depot/disk"
	"github.com/depot-dev/depot/messages"
)

// A follower's fetch is answered even when one of its partitions never
// answers (a replica stopped or stuck with the request in its mailbox):
// that partition with REQUEST_TIMED_OUT, the others as they are, once the
// fetch's max wait and a second have passed.
func TestReplicaFetchNotHeldBackByASilentPartition(t *testing.T) {
	system := actortest.System(t)
	logger := logrus.NewEntry(actortest.Logger(t, logrus.WarnLevel))
	silent := system.Root.Spawn(actor.PropsFromFunc(func(actor.Context) {}))
	m := &partitionManager{
		cfg:      PartitionManagerConfig{NodeID: 1, Logger: logger},
		children: map[disk.TopicPartition]*actor.PID{{Topic: "t", Partition: 0}: silent},
		gathers:  newGathers(),
		outboxes: actors.NewOutboxes(logger),
		logger:   logger,
	}
	pid := system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return m }))
	req := &messages.ReplicaFetchRequest{ReplicaId: 2, MaxWaitMs: 100, CorrelationId: 7, Partitions: []*messages.ReplicaFetchPartition{
		{Topic: "t", Partition: 0, FetchOffset: 5}, {Topic: "t", Partition: 1},
	}}
	start := time.Now()
	res, err := actors.Request[*messages.ReplicaFetchResponse](context.Background(), system.Root, pid, req, 10*time.Second)
	require.NoError(t, err)
	require.GreaterOrEqual(t, time.Since(start), gatherSlack)
	require.Equal(t, uint64(7), res.GetCorrelationId())
	require.Len(t, res.GetPartitions(), 2)
	require.Equal(t, messages.ErrorCode_REQUEST_TIMED_OUT, res.GetPartitions()[0].GetError())
	require.Equal(t, int64(5), res.GetPartitions()[0].GetFetchOffset())
	require.Equal(t, "t-0: node 1's replica did not answer in time", res.GetPartitions()[0].GetErrorMessage())
	require.Equal(t, messages.ErrorCode_NOT_LEADER_OR_FOLLOWER, res.GetPartitions()[1].GetError(), "no replica of it here")
	for i, p := range res.GetPartitions() {
		require.Equal(t, "t", p.GetTopic())
		require.Equal(t, int32(i), p.GetPartition())
		require.Empty(t, p.GetRecords())
	}

	epochs, err := actors.Request[*messages.OffsetForLeaderEpochResponse](context.Background(), system.Root, pid,
		&messages.OffsetForLeaderEpochRequest{ReplicaId: 2, CorrelationId: 8, Partitions: []*messages.EpochQuery{{Topic: "t", Partition: 0}}}, 10*time.Second)
	require.NoError(t, err)
	require.Equal(t, messages.ErrorCode_REQUEST_TIMED_OUT, epochs.GetPartitions()[0].GetError())
}

// A leader whose ISR change is refused (its follower's node is fenced)
// asks again only after a while, not on each of the follower's fetches.
func TestRefusedISRChangeIsNotAskedOnEveryFetch(t *testing.T) {
	f := newMoveFixture(t, 1<<20, nil)
	f.stop(t)
	var asked atomic.Int32
	f.controller = f.system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if _, ok := ctx.Message().(*messages.AlterPartitionRequest); ok {
			asked.Add(1)
			ctx.Respond(&messages.AlterPartitionResponse{Error: messages.ErrorCode_INELIGIBLE_REPLICA, ErrorMessage: "node 2 is fenced"})
		}
	}))
	f.start(t, f.dirs[0], 0)
	f.system.Root.Send(f.pid, &messages.PartitionState{Topic: "orders", Leader: 0, LeaderEpoch: 1, Replicas: []int32{0, 2}, Isr: []int32{0}})
	for range 50 {
		res := moveRequest[*replicaFetched](t, f, &replicaFetch{replica: 2, req: &messages.ReplicaFetchPartition{Topic: "orders", CurrentLeaderEpoch: 1}})
		require.Equal(t, messages.ErrorCode_NONE, res.resp.GetError(), res.resp.GetErrorMessage())
		time.Sleep(2 * time.Millisecond)
	}
	require.Equal(t, int32(1), asked.Load(), "one refused change, then a second of quiet")
}

// A follower's parked fetch that an append wakes within ReplicaFetchLinger
// of the manager's last answer to a follower waits out the rest of that
// time, and its answer carries what the partition appended meanwhile,
// from one more ask; woken later than that, it is answered at once.
func TestReplicaFetchLingersAfterAnAnswer(t *testing.T) {
	const linger = 300 * time.Millisecond
	system := actortest.System(t)
	logger := logrus.NewEntry(actortest.Logger(t, logrus.WarnLevel))
	tp := disk.TopicPartition{Topic: "t", Partition: 0}
	// The partition answers with the records it has past the fetch offset,
	// and counts the asks.
	var available, asks atomic.Int64
	part := system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		m, ok := ctx.Message().(*replicaFetch)
		if !ok {
			return
		}
		asks.Add(1)
		resp := &messages.ReplicaFetchedPartition{Topic: tp.Topic, Partition: tp.Partition, FetchOffset: m.req.GetFetchOffset()}
		if n := available.Load() - m.req.GetFetchOffset(); n > 0 {
			resp.Records = make([]byte, n)
		}
		ctx.Respond(&replicaFetched{gather: m.gather, part: m.part, resp: resp})
	}))
	m := &partitionManager{
		cfg:      PartitionManagerConfig{NodeID: 1, ReplicaFetchLinger: linger, Logger: logger},
		children: map[disk.TopicPartition]*actor.PID{tp: part},
		gathers:  newGathers(),
		outboxes: actors.NewOutboxes(logger),
		logger:   logger,
	}
	pid := system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return m }))
	fetch := func(offset int64) (*messages.ReplicaFetchResponse, time.Time) {
		req := &messages.ReplicaFetchRequest{ReplicaId: 2, MaxWaitMs: 5000, CorrelationId: uint64(offset + 1),
			Partitions: []*messages.ReplicaFetchPartition{{Topic: tp.Topic, Partition: tp.Partition, FetchOffset: offset}}}
		res, err := actors.Request[*messages.ReplicaFetchResponse](context.Background(), system.Root, pid, req, 10*time.Second)
		require.NoError(t, err)
		return res, time.Now()
	}
	// parked sends a fetch from offset that finds nothing, and waits for
	// the manager to park it.
	parked := func(offset int64) <-chan *messages.ReplicaFetchResponse {
		before := asks.Load()
		done := make(chan *messages.ReplicaFetchResponse, 1)
		go func() {
			res, _ := fetch(offset)
			done <- res
		}()
		require.Eventually(t, func() bool { return asks.Load() == before+1 }, 5*time.Second, time.Millisecond)
		return done
	}

	available.Store(10)
	res, answered := fetch(0)
	require.Len(t, res.GetPartitions()[0].GetRecords(), 10)

	done := parked(10)
	before := asks.Load()
	available.Store(20)
	system.Root.Send(pid, &replicaWake{tp: tp})
	time.Sleep(linger / 3)
	available.Store(30) // appended while the wake lingers: it sends no other
	res = <-done
	require.GreaterOrEqual(t, time.Since(answered), linger, "answered within the linger of the last answer")
	require.Len(t, res.GetPartitions()[0].GetRecords(), 20, "the records appended while it lingered")
	require.Equal(t, before+1, asks.Load(), "asked once more, after the linger")

	done = parked(30)
	time.Sleep(linger + 50*time.Millisecond)
	available.Store(40)
	woken := time.Now()
	system.Root.Send(pid, &replicaWake{tp: tp})
	res = <-done
	require.Less(t, time.Since(woken), linger, "woken long after the last answer, answered at once")
	require.Len(t, res.GetPartitions()[0].GetRecords(), 10)
}
