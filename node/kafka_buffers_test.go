package node

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
)

// bufferTestValue is the value of the record with key: size bytes (100 to
// about 8 KiB, by the key) of noise that only that key has, which no
// compression shrinks.
func bufferTestValue(key string) []byte {
	seed := sha256.Sum256([]byte(key))
	v := make([]byte, 100+int(seed[0])<<5)
	_, _ = rand.NewChaCha8(seed).Read(v)
	return v
}

// consumeChecked reads want records of topic from the start through a new
// kgo consumer that fetches at most fetchBytes of a partition at a time,
// and checks that each has the value of its key, and that no key comes
// twice. Safe to call from any goroutine.
func consumeChecked(seeds []string, topic string, want, fetchBytes int) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxPartitionBytes(int32(fetchBytes)), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	seen := map[string]bool{}
	for len(seen) < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return fmt.Errorf("consumed %d of %d: %w", len(seen), want, ctx.Err())
		}
		for _, e := range fs.Errors() {
			return fmt.Errorf("%s/%d: %w", e.Topic, e.Partition, e.Err)
		}
		for _, r := range fs.Records() {
			key := string(r.Key)
			if seen[key] {
				return fmt.Errorf("%s twice", key)
			}
			seen[key] = true
			if !bytes.Equal(bufferTestValue(key), r.Value) {
				return fmt.Errorf("value of %s at %d/%d is not the one produced", key, r.Partition, r.Offset)
			}
		}
	}
	return nil
}

// The frames a Kafka fetch's records are read into go back to the node's
// pool once the answer is written, and serve the fetches after it: every
// frame a fetch takes is handed back, and they are handed out again.
func TestKafkaFetchFramesHandedBack(t *testing.T) {
	n := startKafkaNode(t)
	createTopic(t, n, "frames", 1)
	seeds := []string{n.KafkaAddress()}
	prod := kafkaClient(t, kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic("frames"),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerBatchMaxBytes(32<<10))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const count = 1000
	var records []*kgo.Record
	for i := range count {
		key := fmt.Sprintf("frame-%d", i)
		records = append(records, &kgo.Record{Key: []byte(key), Value: bufferTestValue(key)})
	}
	require.NoError(t, prod.ProduceSync(ctx, records...).FirstErr())

	const fetchBytes = 64 << 10
	before := n.Transport().PoolStats()
	require.NoError(t, consumeChecked(seeds, "frames", count, fetchBytes))
	// The last frame is handed back once its writev returns, which may be
	// after the client read it.
	require.Eventually(t, func() bool {
		now := n.Transport().PoolStats()
		return now.Puts-before.Puts >= now.Gets-before.Gets
	}, 10*time.Second, 5*time.Millisecond, "fetch frames not handed back")
	after := n.Transport().PoolStats()
	gets, reused := after.Gets-before.Gets, after.Reused-before.Reused
	// About 4 MiB of records, in fetches of at most 64 KiB and a batch.
	require.GreaterOrEqual(t, gets, int64(20), "fetches that took a frame")
	require.GreaterOrEqual(t, reused, gets/2, "frames handed out again")
}

// While producers write and consumers read the same partitions at once,
// with every buffer handed back to the node's pool overwritten at once
// (remote.Transport.PoisonPool), every record read is what was produced:
// no produce request's buffer is reused before its partitions have
// appended its records, and no fetch frame before its answer is written.
// Run with -race.
func TestKafkaRecycledBuffersStayIntact(t *testing.T) {
	n := startKafkaNode(t)
	n.Transport().PoisonPool(true)
	createTopic(t, n, "recycled", 2)
	seeds := []string{n.KafkaAddress()}
	before := n.Transport().PoolStats()

	producers := []struct {
		name string
		opts []kgo.Opt
	}{
		{"acks1", []kgo.Opt{kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite()}},
		{"all", nil},
	}
	const perProducer = 600
	const consumers = 3
	total := perProducer * len(producers)
	var wg sync.WaitGroup
	for _, p := range producers {
		cl := kafkaClient(t, append([]kgo.Opt{kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic("recycled"),
			kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerBatchMaxBytes(32 << 10)}, p.opts...)...)
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
			defer cancel()
			results := make(chan error, perProducer)
			for i := range perProducer {
				key := fmt.Sprintf("%s-%d", p.name, i)
				cl.Produce(ctx, &kgo.Record{Key: []byte(key), Value: bufferTestValue(key)}, func(_ *kgo.Record, err error) { results <- err })
			}
			for range perProducer {
				if err := <-results; err != nil {
					t.Errorf("producer %s: %v", p.name, err)
				}
			}
		}()
	}
	for i := range consumers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := consumeChecked(seeds, "recycled", total, 16<<10*(i+1)); err != nil {
				t.Errorf("consumer %d: %v", i, err)
			}
		}()
	}
	wg.Wait()
	after := n.Transport().PoolStats()
	require.Positive(t, after.Reused-before.Reused, "no buffer was recycled: the test proves nothing")
}
