package node

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"

	"github.com/depot-dev/depot/actors"
	"github.com/depot-dev/depot/actors/actortest"
	"github.com/depot-dev/depot/actors/client"
	"github.com/depot-dev/depot/actors/disks"
	"github.com/depot-dev/depot/messages"
)

// A node's acks=all produces to many partitions go through its log dirs'
// flushers: every partition's group commits run in their passes, and every
// record acknowledged is there.
func TestAcksAllGoesThroughTheLogDirsFlushers(t *testing.T) {
	const partitions, perPartition = 24, 20
	n := startNode(t, testConfig(t, t.TempDir()))
	created := request[*messages.CreateTopicResponse](t, n, n.Metadata(), &messages.CreateTopicRequest{Name: "orders", Partitions: partitions})
	require.Equal(t, messages.ErrorCode_NONE, created.Error, created.ErrorMessage)

	c, err := client.New(client.Brokers(n.Address()), client.RequestTimeout(requestTimeout), client.Logger(logrus.NewEntry(actortest.Logger(t, logrus.WarnLevel))))
	require.NoError(t, err)
	defer c.Close()
	p, err := c.NewProducer(client.Acks(-1), client.WithPartitioner(client.ManualPartitioner()))
	require.NoError(t, err)
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var mu sync.Mutex
	var failures []error
	for i := range perPartition {
		for part := range int32(partitions) {
			p.Produce(ctx, &client.Record{Topic: "orders", Partition: part, Value: fmt.Appendf(nil, "%d-%d", part, i)}, func(_ *client.Record, err error) {
				if err != nil {
					mu.Lock()
					failures = append(failures, err)
					mu.Unlock()
				}
			})
		}
	}
	require.NoError(t, p.Flush(ctx))
	require.Empty(t, failures)

	var flushes, passes uint64
	dirs := describeDirs(t, n)
	require.Len(t, dirs, 2, "the default log dirs")
	for _, d := range dirs {
		flusher := disks.FlusherOf(actor.NewPID(n.Address(), actors.LogDirActorName(d.Path)))
		status := request[*disks.FlusherStatusResponse](t, n, flusher, &disks.FlusherStatusRequest{})
		require.Positive(t, status.Passes, "%s: its partitions' flushes ran in its flusher", d.Path)
		flushes += status.Flushes
		passes += status.Passes
	}
	require.GreaterOrEqual(t, flushes, uint64(partitions), "every partition flushed through a flusher")
	require.LessOrEqual(t, passes, flushes)
	for part := range int32(partitions) {
		pid := partitionPID(t, n, "orders", part)
		require.Len(t, fetchValues(t, n, pid, "orders", 0), perPartition, "partition %d", part)
		st := request[*messages.PartitionStatusResponse](t, n, pid, &messages.PartitionStatusRequest{})
		require.Equal(t, st.LogEndOffset, st.RecoveryPoint, "partition %d is durable", part)
	}
}
