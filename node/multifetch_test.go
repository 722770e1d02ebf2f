package node

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/depot-dev/depot/actors/client"
)

// consumeWhileProducing has c's consumer read topic, all of whose
// partitions it is assigned from the start, while records records are
// produced to it, and checks that it reads each record once, in order:
// each partition's offsets from 0 with no gap, each holding the record
// produced there.
func consumeWhileProducing(t *testing.T, c *client.Client, topic string, records int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cons, err := c.NewConsumer(client.FetchMaxWait(200 * time.Millisecond))
	require.NoError(t, err)
	defer cons.Close()
	cons.AssignTopic(topic, client.AtStart())

	p, err := c.NewProducer(client.Acks(-1), client.Linger(2*time.Millisecond))
	require.NoError(t, err)
	defer p.Close()
	var mu sync.Mutex
	produced := map[int32]map[int64]string{}
	var failed error
	for i := range records {
		r := &client.Record{Topic: topic, Key: fmt.Appendf(nil, "key-%d", i), Value: fmt.Appendf(nil, "value-%d-%080d", i, 0)}
		p.Produce(ctx, r, func(r *client.Record, err error) {
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failed = err
				return
			}
			if produced[r.Partition] == nil {
				produced[r.Partition] = map[int64]string{}
			}
			produced[r.Partition][r.Offset] = string(r.Value)
		})
	}
	require.NoError(t, p.Flush(ctx))
	mu.Lock()
	require.NoError(t, failed)
	mu.Unlock()

	got := map[int32][]*client.Record{}
	for n := 0; n < records; {
		rs, err := cons.Poll(ctx)
		require.NoError(t, err, "after %d of %d records", n, records)
		for _, r := range rs {
			got[r.Partition] = append(got[r.Partition], r)
		}
		n += len(rs)
	}
	short, stop := context.WithTimeout(ctx, 300*time.Millisecond)
	defer stop()
	rs, err := cons.Poll(short)
	require.ErrorIs(t, err, context.DeadlineExceeded, "nothing more: %d records", len(rs))
	require.Len(t, got, len(produced))
	for partition, rs := range got {
		require.Len(t, rs, len(produced[partition]), "partition %d", partition)
		for i, r := range rs {
			require.Equal(t, int64(i), r.Offset, "partition %d", partition)
			require.Equal(t, produced[partition][r.Offset], string(r.Value), "partition %d offset %d", partition, r.Offset)
		}
	}
}

// fetchesOver counts the consumers' fetches of several partitions that n
// answered, and those of them that named more than parts partitions (parts
// a power of two).
func fetchesOver(t *testing.T, n *Node, parts float64) (all, over uint64) {
	t.Helper()
	families, err := n.registry.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != "depot_consumer_fetch_partitions" {
			continue
		}
		h := f.GetMetric()[0].GetHistogram()
		all = h.GetSampleCount()
		for _, b := range h.GetBucket() {
			if b.GetUpperBound() == parts {
				over = all - b.GetCumulativeCount()
			}
		}
	}
	return all, over
}

// A consumer of the 200 partitions of one node, over remote, fetches them
// together, in requests naming more than 128 of them, and reads every
// record once, in order, while they are produced.
func TestConsumeManyPartitionsOfOneNode(t *testing.T) {
	const partitions, records = 200, 20000
	cfg := testConfig(t, t.TempDir())
	n := startNode(t, cfg)
	c := newClient(t, n.Address())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := c.CreateTopic(ctx, "many", partitions, nil)
	require.NoError(t, err)
	consumeWhileProducing(t, c, "many", records)
	all, over := fetchesOver(t, n, 128)
	require.Positive(t, all)
	require.Positive(t, over, "a fetch named more than 128 partitions")
}

// A consumer of 200 partitions led by three nodes fetches those of each
// node together from that node, and reads every record once, in order,
// while they are produced.
func TestConsumeManyPartitionsOfThreeNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("three nodes and 200 partitions")
	}
	const partitions, records = 200, 20000
	c := newTestCluster(t, 3)
	cl := c.client()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	md, err := cl.CreateTopic(ctx, "many", partitions, nil)
	require.NoError(t, err)
	led := map[int32]int{}
	for _, p := range md.GetPartitions() {
		led[p.GetLeader()]++
	}
	require.Len(t, led, 3, "each node leads some")
	consumeWhileProducing(t, cl, "many", records)
	for id, n := range c.nodes {
		all, over := fetchesOver(t, n, 32)
		require.Positive(t, all, "node %d", id)
		require.Positive(t, over, "node %d: a fetch named more than 32 of its %d partitions", id, led[id])
	}
}
