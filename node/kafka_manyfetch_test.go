package node

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A Kafka fetch of many partitions of the node goes to its partition
// manager as one request: kgo reads every record of 32 partitions once,
// in order, in fetches that named more than 16 partitions each; a fetch
// within a small max bytes gets the first partition's records whole and
// no more than fit of the others; and a fetch that waits for any byte of
// 32 empty partitions is answered by the first record produced to any of
// them, well before its wait passes.
func TestKafkaFetchManyPartitionsAtOnce(t *testing.T) {
	const partitions = 32
	n := startKafkaNode(t)
	createTopic(t, n, "wide", partitions)
	createTopic(t, n, "quiet", partitions)
	seeds := []string{n.KafkaAddress()}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	prod := kafkaClient(t, kgo.SeedBrokers(seeds...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	var rs []*kgo.Record
	for i := range 20 * partitions {
		p := int32(i % partitions)
		rs = append(rs, &kgo.Record{Topic: "wide", Partition: p, Value: wideValue(p, int64(i/partitions))})
	}
	require.NoError(t, prod.ProduceSync(ctx, rs...).FirstErr())

	before, _ := fetchesOver(t, n, 16)
	pool := n.Transport().PoolStats()
	got := kafkaConsume(t, seeds, "wide", len(rs))
	require.Len(t, got, len(rs), "every record once")
	next := map[int32]int64{}
	for _, r := range got {
		require.Equal(t, next[r.Partition], r.Offset, "partition %d in order", r.Partition)
		require.Equal(t, wideValue(r.Partition, r.Offset), r.Value)
		next[r.Partition]++
	}
	all, over := fetchesOver(t, n, 16)
	require.Greater(t, all, before, "the consumer's fetches went to the partition manager")
	require.Positive(t, over, "fetches named more than 16 partitions at once")
	require.Eventually(t, func() bool {
		now := n.Transport().PoolStats()
		return now.Gets > pool.Gets && now.Puts-pool.Puts >= now.Gets-pool.Gets
	}, 10*time.Second, 5*time.Millisecond, "the frames of the partitions' records are handed back once written")

	// Within 200 bytes: the first partition's records whole, and of the
	// others no more than fits.
	fetch := kmsg.NewPtrFetchRequest()
	fetch.SetVersion(12)
	fetch.MaxBytes = 200
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = "wide"
	for p := range int32(partitions) {
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.Partition, fp.PartitionMaxBytes = p, 1<<20
		ft.Partitions = append(ft.Partitions, fp)
	}
	fetch.Topics = append(fetch.Topics, ft)
	c := dialKafka(t, n)
	c.send(fetch, 1)
	_, body := c.response()
	resp := kmsg.NewPtrFetchResponse()
	resp.SetVersion(12)
	require.NoError(t, resp.ReadFrom(body[1:]))
	require.Len(t, resp.Topics[0].Partitions, partitions)
	total := 0
	for i, p := range resp.Topics[0].Partitions {
		require.Equal(t, int16(0), p.ErrorCode, "partition %d", p.Partition)
		require.Equal(t, int64(20), p.HighWatermark)
		if i == 0 {
			require.NotEmpty(t, p.RecordBatches, "the first partition's records, whatever their size")
			require.Greater(t, len(p.RecordBatches), 200)
			continue
		}
		total += len(p.RecordBatches)
	}
	require.Zero(t, total, "no room left for the others")

	// A fetch that waits for any byte of the quiet topic's partitions.
	mark, _ := fetchesOver(t, n, 16)
	cons := kafkaClient(t, kgo.SeedBrokers(seeds...), kgo.ConsumeTopics("quiet"), kgo.FetchMaxWait(time.Minute),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	polled := make(chan []*kgo.Record, 1)
	go func() {
		short, stop := context.WithTimeout(ctx, 20*time.Second)
		defer stop()
		polled <- cons.PollFetches(short).Records()
	}()
	require.Eventually(t, func() bool {
		all, _ := fetchesOver(t, n, 16)
		return all > mark
	}, 10*time.Second, 5*time.Millisecond, "the waiting fetch reached the manager")
	require.NoError(t, prod.ProduceSync(ctx, &kgo.Record{Topic: "quiet", Partition: 17, Value: []byte("wake")}).FirstErr())
	woken := <-polled
	require.Len(t, woken, 1, "answered by the record, not after its minute of wait")
	require.Equal(t, int32(17), woken[0].Partition)
}

// wideValue is the value of the record at offset of partition: 1 KiB, so
// that a partition's records are read into a frame of the node's pool.
func wideValue(partition int32, offset int64) []byte {
	v := make([]byte, 1024)
	copy(v, fmt.Sprintf("%d-%d", partition, offset))
	return v
}
