package node

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"

	"github.com/depot-dev/depot/actors/client"
)

// newClient connects a client, in its own actor system, to n over remote on
// 127.0.0.1.
func newClient(t testing.TB, addr string) *client.Client {
	t.Helper()
	logger := logrus.New()
	logger.SetLevel(logrus.WarnLevel)
	c, err := client.New(client.Brokers(addr), client.RequestTimeout(10*time.Second), client.Logger(logrus.NewEntry(logger)))
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}

// consumeAll reads every record of topic's partitions up to their end
// offsets at the time of the call.
func consumeAll(t testing.TB, c *client.Client, topic string, partitions int32) map[int32][]*client.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	want := map[int32]int64{}
	total := int64(0)
	for p := int32(0); p < partitions; p++ {
		end, err := c.ListOffset(ctx, topic, p, -1)
		require.NoError(t, err)
		want[p] = end
		total += end
	}
	consumer, err := c.NewConsumer()
	require.NoError(t, err)
	defer consumer.Close()
	consumer.AssignTopic(topic, client.AtStart())
	got := map[int32][]*client.Record{}
	for n := int64(0); n < total; {
		records, err := consumer.Poll(ctx)
		require.NoError(t, err)
		for _, r := range records {
			got[r.Partition] = append(got[r.Partition], r)
			n++
		}
	}
	return got
}

func TestEndToEndEachAcks(t *testing.T) {
	const (
		partitions = 4
		records    = 100_000
	)
	n := startNode(t, testConfig(t, t.TempDir()))
	c := newClient(t, n.Address())
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	for _, acks := range []int{0, 1, -1} {
		t.Run(fmt.Sprintf("acks=%d", acks), func(t *testing.T) {
			topic := fmt.Sprintf("e2e-acks%d", acks)
			if acks < 0 {
				topic = "e2e-acksall"
			}
			_, err := c.CreateTopic(ctx, topic, partitions, nil)
			require.NoError(t, err)
			p, err := c.NewProducer(client.Acks(acks))
			require.NoError(t, err)
			var (
				mu       sync.Mutex
				failures []error
				acked    = map[string]*client.Record{}
			)
			sent := make([]*client.Record, records)
			for i := range sent {
				r := &client.Record{
					Topic: topic,
					Key:   []byte(fmt.Sprintf("key-%d", i%1000)),
					Value: []byte(fmt.Sprintf("value-%d", i)),
				}
				sent[i] = r
				p.Produce(ctx, r, func(r *client.Record, err error) {
					mu.Lock()
					defer mu.Unlock()
					if err != nil {
						failures = append(failures, err)
						return
					}
					acked[string(r.Value)] = r
				})
			}
			require.NoError(t, p.Flush(ctx))
			require.NoError(t, p.Close())
			require.Empty(t, failures)
			require.Len(t, acked, records)
			if acks == 0 {
				// Nothing said the records were written, only sent: the
				// partitions' ends are read once they hold them all.
				require.Eventually(t, func() bool {
					written := int64(0)
					for p := range int32(partitions) {
						end, err := c.ListOffset(ctx, topic, p, client.LatestOffset)
						if err != nil {
							return false
						}
						written += end
					}
					return written == records
				}, time.Minute, 10*time.Millisecond)
			}

			got := consumeAll(t, c, topic, partitions)
			// Per partition: offsets dense from 0, records in the order they
			// were produced, each key on Kafka's murmur2 partition.
			position := map[string]int{}
			for i, r := range sent {
				position[string(r.Value)] = i
			}
			count := 0
			for partition, rs := range got {
				last := -1
				for i, r := range rs {
					require.Equal(t, int64(i), r.Offset, "partition %d", partition)
					require.Equal(t, int32(client.KeyPartition(r.Key, partitions)), partition, "key %s", r.Key)
					pos, ok := position[string(r.Value)]
					require.True(t, ok, "unknown value %q", r.Value)
					require.Greater(t, pos, last, "partition %d out of order at offset %d", partition, r.Offset)
					last = pos
					require.Equal(t, fmt.Sprintf("key-%d", pos%1000), string(r.Key))
					if acks != 0 {
						ack := acked[string(r.Value)]
						require.Equal(t, r.Offset, ack.Offset, "acknowledged offset of %s", r.Value)
						require.Equal(t, r.Partition, ack.Partition)
					}
					count++
				}
			}
			require.Equal(t, records, count, "every record once")
		})
	}
}
