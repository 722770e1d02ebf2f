package node

import (
	"context"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"

	"github.com/depot-dev/depot/actors/client"
)

// TestCrashKeepsAcknowledgedRecords kills a node with SIGKILL while two
// producers (acks=1 and acks=all) are writing, restarts it, and checks that
// every acknowledged record is there, at its acknowledged offset, once.
func TestCrashKeepsAcknowledgedRecords(t *testing.T) {
	dataDir := t.TempDir()
	listen := unusedAddress(t)
	proc := startNodeProcess(t, dataDir, listen)
	logger := logrus.New()
	logger.SetOutput(io.Discard)
	c, err := client.New(client.Brokers(listen), client.RequestTimeout(5*time.Second), client.Logger(logrus.NewEntry(logger)))
	require.NoError(t, err)
	defer c.Close()
	waitReady(t, c, proc)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	type ack struct {
		partition int32
		offset    int64
	}
	acked := map[string]map[string]ack{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	produceCtx, stopProducing := context.WithCancel(ctx)
	for _, acks := range []int{1, -1} {
		topic := fmt.Sprintf("crash-acks%d", acks)
		_, err := c.CreateTopic(ctx, topic, 2, nil)
		require.NoError(t, err)
		mu.Lock() // the first producer's promises read acked meanwhile
		acked[topic] = map[string]ack{}
		mu.Unlock()
		p, err := c.NewProducer(client.Acks(acks), client.DeliveryTimeout(3*time.Second), client.ProducerRequestTimeout(time.Second))
		require.NoError(t, err)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer p.Close()
			for i := 0; i < 2_000_000 && produceCtx.Err() == nil; i++ {
				r := &client.Record{Topic: topic, Key: []byte(fmt.Sprint(i % 10)), Value: []byte(fmt.Sprintf("%s-%d", topic, i))}
				p.Produce(produceCtx, r, func(r *client.Record, err error) {
					if err != nil {
						return
					}
					mu.Lock()
					acked[topic][string(r.Value)] = ack{r.Partition, r.Offset}
					mu.Unlock()
				})
			}
		}()
	}
	// Kill once both producers have had plenty acknowledged.
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(acked["crash-acks1"]) > 20_000 && len(acked["crash-acks-1"]) > 20_000
	}, time.Minute, 5*time.Millisecond, "producers too slow:\n%s", proc.stderr.String())
	proc.kill(t)
	time.Sleep(200 * time.Millisecond)
	stopProducing()
	wg.Wait()

	proc = startNodeProcess(t, dataDir, listen)
	waitReady(t, c, proc)
	mu.Lock()
	defer mu.Unlock()
	for topic, acks := range acked {
		consumer, err := c.NewConsumer()
		require.NoError(t, err)
		consumer.AssignTopic(topic, client.AtStart())
		seen := map[string]bool{}
		next := map[int32]int64{}
		end := map[int32]int64{}
		for p := int32(0); p < 2; p++ {
			end[p], err = c.ListOffset(ctx, topic, p, -1)
			require.NoError(t, err)
		}
		for next[0] < end[0] || next[1] < end[1] {
			records, err := consumer.Poll(ctx)
			require.NoError(t, err)
			for _, r := range records {
				require.Equal(t, next[r.Partition], r.Offset, "%s/%d dense offsets", topic, r.Partition)
				next[r.Partition]++
				require.False(t, seen[string(r.Value)], "%s duplicated", r.Value)
				seen[string(r.Value)] = true
				if a, ok := acks[string(r.Value)]; ok {
					require.Equal(t, a, ack{r.Partition, r.Offset}, "%s moved", r.Value)
				}
			}
		}
		consumer.Close()
		for value := range acks {
			require.True(t, seen[value], "acknowledged %s lost", value)
		}
		t.Logf("%s: %d acknowledged, %d after restart", topic, len(acks), len(seen))
	}
}
