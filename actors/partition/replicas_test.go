package partition

import (
	"context"
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
		replicas: replicaGathers{fetches: map[uint64]*replicaGather{}, epochs: map[uint64]*epochGather{}},
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
	require.GreaterOrEqual(t, time.Since(start), replicaGatherSlack)
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
