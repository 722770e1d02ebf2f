package bench

import (
	"context"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"

	"github.com/depot-dev/depot/actors"
	"github.com/depot-dev/depot/actors/client"
	"github.com/depot-dev/depot/messages"
	"github.com/depot-dev/depot/node"
	"github.com/depot-dev/depot/wire"
)

const (
	benchRecordSize = 1 << 10
	benchBatchBytes = 64 << 10
	benchTimeout    = 30 * time.Second
)

// startBenchNode starts a node on b's temporary directory with one topic of
// one partition and returns the node and the partition's actor.
func startBenchNode(b *testing.B, topic string) (*node.Node, *actor.PID) {
	b.Helper()
	logger := logrus.New()
	logger.SetLevel(logrus.WarnLevel)
	n, err := node.Start(node.Config{DataDir: b.TempDir(), Listen: "127.0.0.1:0", HTTP: "", Logger: logger})
	require.NoError(b, err)
	b.Cleanup(func() { _ = n.Stop() })
	ctx := context.Background()
	root := n.System().Root
	created, err := actors.Request[*messages.CreateTopicResponse](ctx, root, n.Metadata(), &messages.CreateTopicRequest{Name: topic, Partitions: 1}, benchTimeout)
	require.NoError(b, err)
	require.Equal(b, messages.ErrorCode_NONE, created.Error, created.ErrorMessage)
	md, err := actors.Request[*messages.MetadataResponse](ctx, root, n.Metadata(), &messages.MetadataRequest{Topics: []string{topic}}, benchTimeout)
	require.NoError(b, err)
	require.Len(b, md.Topics, 1)
	require.Len(b, md.Topics[0].Partitions, 1)
	p := md.Topics[0].Partitions[0]
	return n, actor.NewPID(p.LeaderAddress, p.ActorName)
}

// benchBatch is a record batch of 1 KiB records up to 64 KiB, without a
// producer id, so that the same bytes can be appended again and again.
func benchBatch(b *testing.B) []byte {
	b.Helper()
	value := make([]byte, benchRecordSize)
	for i := range value {
		value[i] = byte(i * 7)
	}
	builder := wire.NewBuilder(wire.NoProducer)
	for builder.Size()+benchRecordSize+64 <= benchBatchBytes {
		builder.Append(time.Now().UnixMilli(), nil, value, nil)
	}
	out, err := builder.AppendTo(nil)
	require.NoError(b, err)
	return out
}

func benchmarkAppend(b *testing.B, acks int32) {
	n, pid := startBenchNode(b, "append")
	batch := benchBatch(b)
	ctx := context.Background()
	root := n.System().Root
	b.SetBytes(int64(len(batch)))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		resp, err := actors.Request[*messages.ProduceResponse](ctx, root, pid, &messages.ProduceRequest{Topic: "append", Partition: 0, Acks: acks, Records: batch}, benchTimeout)
		if err != nil {
			b.Fatal(err)
		}
		if resp.Error != messages.ErrorCode_NONE {
			b.Fatalf("produce: %v %s", resp.Error, resp.ErrorMessage)
		}
	}
}

// BenchmarkPartitionAppend sends 64 KiB batches of 1 KiB records to a
// partition actor in the same process, one at a time, with acks=1.
func BenchmarkPartitionAppend(b *testing.B) { benchmarkAppend(b, 1) }

// BenchmarkPartitionAppendAcksAll is BenchmarkPartitionAppend with acks=all:
// each request waits for an fsync, no group commit to share it.
func BenchmarkPartitionAppendAcksAll(b *testing.B) { benchmarkAppend(b, -1) }

// BenchmarkPartitionFetch fetches 1 MiB at a time from a partition holding
// 32 MiB, cycling through it.
func BenchmarkPartitionFetch(b *testing.B) {
	n, pid := startBenchNode(b, "fetch")
	batch := benchBatch(b)
	ctx := context.Background()
	root := n.System().Root
	const fill = 32 << 20
	var end int64
	for written := 0; written < fill; written += len(batch) {
		resp, err := actors.Request[*messages.ProduceResponse](ctx, root, pid, &messages.ProduceRequest{Topic: "fetch", Acks: 1, Records: batch}, benchTimeout)
		require.NoError(b, err)
		require.Equal(b, messages.ErrorCode_NONE, resp.Error, resp.ErrorMessage)
		end = resp.BaseOffset
	}
	fetch := func(offset int64) *messages.FetchResponse {
		resp, err := actors.Request[*messages.FetchResponse](ctx, root, pid, &messages.FetchRequest{Topic: "fetch", Offset: offset, MaxBytes: 1 << 20}, benchTimeout)
		if err != nil {
			b.Fatal(err)
		}
		if resp.Error != messages.ErrorCode_NONE || len(resp.Records) == 0 {
			b.Fatalf("fetch at %d: %v %s, %d bytes", offset, resp.Error, resp.ErrorMessage, len(resp.Records))
		}
		return resp
	}
	b.SetBytes(int64(len(fetch(0).Records)))
	b.ReportAllocs()
	b.ResetTimer()
	offset := int64(0)
	for b.Loop() {
		resp := fetch(offset)
		last, err := lastOffset(resp.Records)
		if err != nil {
			b.Fatal(err)
		}
		offset = last + 1
		if offset >= end {
			offset = 0
		}
	}
}

// lastOffset is the last offset in a run of batches.
func lastOffset(records []byte) (int64, error) {
	last := int64(-1)
	_, err := wire.Batches(records, func(_ []byte, h wire.Header) error {
		last = h.NextOffset() - 1
		return nil
	})
	return last, err
}

// BenchmarkProduceThroughClient produces 1 KiB records with the client's
// producer (acks=1) from its own actor system, over remote on loopback, to
// an embedded node; b.N records, flushed at the end.
func BenchmarkProduceThroughClient(b *testing.B) {
	n, _ := startBenchNode(b, "client")
	logger := logrus.New()
	logger.SetLevel(logrus.WarnLevel)
	c, err := client.New(client.Brokers(n.Address()), client.Logger(logrus.NewEntry(logger)))
	require.NoError(b, err)
	b.Cleanup(c.Close)
	p, err := c.NewProducer(client.Acks(1))
	require.NoError(b, err)
	b.Cleanup(func() { _ = p.Close() })
	ctx := context.Background()
	value := make([]byte, benchRecordSize)
	records := make([]client.Record, 1<<16) // reused once acknowledged: Flush before each wrap
	require.NoError(b, p.ProduceSync(ctx, &client.Record{Topic: "client", Value: value}))
	var failed error
	promise := func(_ *client.Record, err error) {
		if err != nil && failed == nil {
			failed = err
		}
	}
	b.SetBytes(benchRecordSize)
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		if i%len(records) == 0 && i > 0 {
			require.NoError(b, p.Flush(ctx))
		}
		r := &records[i%len(records)]
		*r = client.Record{Topic: "client", Value: value}
		p.Produce(ctx, r, promise)
		i++
	}
	require.NoError(b, p.Flush(ctx))
	b.StopTimer()
	require.NoError(b, failed)
}
