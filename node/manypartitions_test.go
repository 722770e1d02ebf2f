package node

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"

	"github.com/depot-dev/depot/actors/client"
)

// fdSampler counts the open descriptors of a process (/proc/PID/fd) every
// few milliseconds and keeps the largest count seen.
type fdSampler struct {
	most atomic.Int64
	stop chan struct{}
	done chan struct{}
}

func sampleDescriptors(t *testing.T, pid int) *fdSampler {
	t.Helper()
	s := &fdSampler{stop: make(chan struct{}), done: make(chan struct{})}
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	go func() {
		defer close(s.done)
		ticker := time.NewTicker(5 * time.Millisecond)
		defer ticker.Stop()
		for {
			if entries, err := os.ReadDir(dir); err == nil && int64(len(entries)) > s.most.Load() {
				s.most.Store(int64(len(entries)))
			}
			select {
			case <-s.stop:
				return
			case <-ticker.C:
			}
		}
	}()
	return s
}

// end stops sampling and returns the largest count seen.
func (s *fdSampler) end() int {
	close(s.stop)
	<-s.done
	return int(s.most.Load())
}

// TestManyPartitionsBoundedFiles runs a node holding 5,000 partitions (15,000
// segment files) with --max-open-files 200: it creates them, writes a
// record to each, is killed with SIGKILL, restarts, and reads every record
// back, while the node's open descriptors, sampled throughout, stay within
// the bound and a fixed margin (sockets, lock files, the metadata log, the
// checkpoints and directories being synced).
func TestManyPartitionsBoundedFiles(t *testing.T) {
	if testing.Short() {
		t.Skip("starts, kills and restarts a node of 5,000 partitions")
	}
	const partitions, maxOpenFiles, margin = 5000, 200, 100
	dataDir := t.TempDir()
	listen := unusedAddress(t)
	flags := []string{"--max-open-files", fmt.Sprint(maxOpenFiles)}
	started := time.Now()
	proc := startNodeProcess(t, dataDir, listen, flags...)
	fds := sampleDescriptors(t, proc.cmd.Process.Pid)
	logger := logrus.New()
	logger.SetOutput(io.Discard)
	c, err := client.New(client.Brokers(listen), client.RequestTimeout(2*time.Minute), client.Logger(logrus.NewEntry(logger)))
	require.NoError(t, err)
	defer c.Close()
	waitReady(t, c, proc)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	_, err = c.CreateTopic(ctx, "many", partitions, nil)
	require.NoError(t, err, proc.stderr.String())
	created := time.Since(started)

	p, err := c.NewProducer(client.Acks(-1), client.WithPartitioner(client.ManualPartitioner()), client.Linger(0), client.DeliveryTimeout(2*time.Minute))
	require.NoError(t, err)
	var mu sync.Mutex
	acked := map[int32]int64{}
	var failed error
	var wg sync.WaitGroup
	for i := range partitions {
		wg.Add(1)
		p.Produce(ctx, &client.Record{Topic: "many", Partition: int32(i), Value: []byte(fmt.Sprintf("value-%d", i))}, func(r *client.Record, err error) {
			defer wg.Done()
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failed = err
				return
			}
			acked[r.Partition] = r.Offset
		})
	}
	wg.Wait()
	p.Close()
	require.NoError(t, failed)
	require.Len(t, acked, partitions)
	written := time.Since(started)
	beforeKill := fds.end()

	proc.kill(t)
	proc = startNodeProcess(t, dataDir, listen, flags...)
	fds = sampleDescriptors(t, proc.cmd.Process.Pid)
	waitReady(t, c, proc)
	restarted := time.Since(started)

	consumer, err := c.NewConsumer()
	require.NoError(t, err)
	defer consumer.Close()
	consumer.AssignTopic("many", client.AtStart())
	seen := map[int32]string{}
	for len(seen) < partitions {
		records, err := consumer.Poll(ctx)
		require.NoError(t, err)
		for _, r := range records {
			require.NotContains(t, seen, r.Partition, "partition %d read twice", r.Partition)
			require.Equal(t, acked[r.Partition], r.Offset, "partition %d", r.Partition)
			seen[r.Partition] = string(r.Value)
		}
	}
	for i := range partitions {
		require.Equal(t, fmt.Sprintf("value-%d", i), seen[int32(i)])
	}
	afterRestart := fds.end()
	t.Logf("created in %v, written by %v, restarted by %v, read back by %v; most descriptors open: %d before the kill, %d after",
		created.Round(time.Millisecond), written.Round(time.Millisecond), restarted.Round(time.Millisecond), time.Since(started).Round(time.Millisecond), beforeKill, afterRestart)
	require.LessOrEqual(t, beforeKill, maxOpenFiles+margin)
	require.LessOrEqual(t, afterRestart, maxOpenFiles+margin)
}
