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
	require.Equal(t, messages.ErrorCode_NOT_LEADER_OR_FOLLOWER, res.GetPartitions()[1].GetError(), "no replica of it here")

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
