package node

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"

	"github.com/depot-dev/depot/actors"
	"github.com/depot-dev/depot/actors/actortest"
	"github.com/depot-dev/depot/actors/client"
	"github.com/depot-dev/depot/messages"
)

// fdSampler counts the open descriptors of a process (/proc/PID/fd) every
// few milliseconds and keeps the largest count seen.
type fdSampler struct {
	most atomic.Int64
	stop chan struct{}
	done chan struct{}
}

func sampleDescriptors(pid int) *fdSampler {
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

// manyPartitions is what runManyPartitions saw.
type manyPartitions struct {
	created, written, restarted, readBack time.Duration
	// ready is how long the restarted node took to answer metadata,
	// opened how long until every partition's log was open (0 when not
	// seen), readable how long until every record was read back, and
	// stopped how long its clean stop (SIGTERM) took, each from its own
	// start.
	ready, opened, readable, stopped time.Duration
	// mostBefore and mostAfter are the most descriptors the node had
	// open before the kill, and after the restart.
	mostBefore, mostAfter int
}

// runManyPartitions runs a node process with --max-open-files
// maxOpenFiles, creates topics of perTopic partitions each, writes a
// record to every partition (acks=all), kills the node with SIGKILL,
// restarts it and reads every record back, sampling the node's open
// descriptors all along; then stops it with SIGTERM, which must end in a
// clean exit.
func runManyPartitions(t testing.TB, topics, perTopic, maxOpenFiles int) manyPartitions {
	t.Helper()
	var run manyPartitions
	dataDir := t.TempDir()
	listen := unusedAddress(t)
	flags := []string{"--max-open-files", fmt.Sprint(maxOpenFiles)}
	started := time.Now()
	proc := startNodeProcess(t, dataDir, listen, flags...)
	fds := sampleDescriptors(proc.cmd.Process.Pid)
	logger := logrus.New()
	logger.SetOutput(io.Discard)
	c, err := client.New(client.Brokers(listen), client.RequestTimeout(5*time.Minute), client.Logger(logrus.NewEntry(logger)))
	require.NoError(t, err)
	defer c.Close()
	waitReady(t, c, proc)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()

	names := make([]string, topics)
	for i := range names {
		names[i] = fmt.Sprintf("many-%d", i)
		_, err = c.CreateTopic(ctx, names[i], int32(perTopic), nil)
		require.NoError(t, err, proc.stderr.String())
	}
	run.created = time.Since(started)

	p, err := c.NewProducer(client.Acks(-1), client.WithPartitioner(client.ManualPartitioner()), client.Linger(0), client.DeliveryTimeout(5*time.Minute))
	require.NoError(t, err)
	type tp struct {
		topic     string
		partition int32
	}
	var mu sync.Mutex
	acked := map[tp]int64{}
	var failed error
	var wg sync.WaitGroup
	for _, name := range names {
		for i := range perTopic {
			wg.Add(1)
			p.Produce(ctx, &client.Record{Topic: name, Partition: int32(i), Value: []byte(fmt.Sprintf("%s/%d", name, i))}, func(r *client.Record, err error) {
				defer wg.Done()
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					failed = err
					return
				}
				acked[tp{r.Topic, r.Partition}] = r.Offset
			})
		}
	}
	wg.Wait()
	p.Close()
	require.NoError(t, failed)
	require.Len(t, acked, topics*perTopic)
	run.written = time.Since(started)
	run.mostBefore = fds.end()

	proc.kill(t)
	restarted := time.Now()
	// At info, the node logs when the last partition started in the
	// background has opened its log.
	proc = startNodeProcess(t, dataDir, listen, append(flags, "--log-level", "info")...)
	fds = sampleDescriptors(proc.cmd.Process.Pid)
	waitReady(t, c, proc)
	run.restarted = time.Since(started)
	run.ready = time.Since(restarted)
	openedCh := make(chan time.Duration, 1)
	stopWatching := make(chan struct{})
	defer close(stopWatching)
	go func() {
		ticker := time.NewTicker(100 * time.Millisecond)
		defer ticker.Stop()
		for {
			if proc.stderr.contains("partitions started in the background are open") {
				openedCh <- time.Since(restarted)
				return
			}
			select {
			case <-stopWatching:
				return
			case <-ticker.C:
			}
		}
	}()

	// A consumer a topic: one of many thousands of partitions spends its
	// time on its own bookkeeping.
	seen := map[tp]string{}
	for _, name := range names {
		consumer, err := c.NewConsumer()
		require.NoError(t, err)
		consumer.AssignTopic(name, client.AtStart())
		for read := 0; read < perTopic; {
			records, err := consumer.Poll(ctx)
			require.NoError(t, err)
			for _, r := range records {
				at := tp{r.Topic, r.Partition}
				require.NotContains(t, seen, at, "%s/%d read twice", r.Topic, r.Partition)
				require.Equal(t, acked[at], r.Offset, "%s/%d", r.Topic, r.Partition)
				seen[at] = string(r.Value)
				read++
			}
		}
		consumer.Close()
	}
	require.Len(t, seen, topics*perTopic)
	for at, value := range seen {
		require.Equal(t, fmt.Sprintf("%s/%d", at.topic, at.partition), value)
	}
	run.readBack = time.Since(started)
	run.readable = time.Since(restarted)
	select {
	case run.opened = <-openedCh:
	case <-time.After(time.Minute):
	}
	run.mostAfter = fds.end()

	t.Logf("after the kill: ready in %v, every log open in %v, every record read back in %v", run.ready.Round(time.Millisecond), run.opened.Round(time.Millisecond), run.readable.Round(time.Millisecond))
	stopping := time.Now()
	require.NoError(t, proc.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, proc.cmd.Wait(), "the node's clean stop failed:\n%s", proc.stderr.String())
	run.stopped = time.Since(stopping)
	require.NotContains(t, proc.stderr.String(), "node: unclean stop")
	return run
}

// TestManyPartitionsBoundedFiles runs a node holding 5,000 partitions
// (15,000 segment files) with --max-open-files 200: it creates them, writes
// a record to each, is killed with SIGKILL, restarts, and reads every
// record back, while the node's open descriptors, sampled throughout, stay
// within the bound and a fixed margin (stdio, sockets, lock files, the
// metadata log).
func TestManyPartitionsBoundedFiles(t *testing.T) {
	if testing.Short() {
		t.Skip("starts, kills and restarts a node of 5,000 partitions")
	}
	const maxOpenFiles, margin = 200, 50
	run := runManyPartitions(t, 1, 5000, maxOpenFiles)
	t.Logf("created in %v, written by %v, restarted by %v, read back by %v; after the kill, ready in %v, every log open in %v, all read back in %v; clean stop in %v; most descriptors open: %d before the kill, %d after",
		run.created.Round(time.Millisecond), run.written.Round(time.Millisecond), run.restarted.Round(time.Millisecond),
		run.readBack.Round(time.Millisecond), run.ready.Round(time.Millisecond), run.opened.Round(time.Millisecond), run.readable.Round(time.Millisecond),
		run.stopped.Round(time.Millisecond), run.mostBefore, run.mostAfter)
	require.LessOrEqual(t, run.mostBefore, maxOpenFiles+margin)
	require.LessOrEqual(t, run.mostAfter, maxOpenFiles+margin)
}

// BenchmarkManyPartitions is TestManyPartitionsBoundedFiles at 50,000
// partitions (ten topics of 5,000) and --max-open-files 1000, once
// whatever b.N (run it with -benchtime 1x): it reports how long each
// step took and the most descriptors seen, and fails past the bound and
// the margin. It takes minutes and over a GiB of memory.
func BenchmarkManyPartitions(b *testing.B) {
	const maxOpenFiles, margin = 1000, 50
	run := runManyPartitions(b, 10, 5000, maxOpenFiles)
	b.ReportMetric(run.created.Seconds(), "s-create")
	b.ReportMetric((run.written - run.created).Seconds(), "s-write")
	b.ReportMetric((run.restarted - run.written).Seconds(), "s-restart")
	b.ReportMetric((run.readBack - run.restarted).Seconds(), "s-read")
	b.ReportMetric(run.ready.Seconds(), "s-ready-after-kill")
	b.ReportMetric(run.opened.Seconds(), "s-opened-after-kill")
	b.ReportMetric(run.readable.Seconds(), "s-readable-after-kill")
	b.ReportMetric(run.stopped.Seconds(), "s-clean-stop")
	b.ReportMetric(float64(max(run.mostBefore, run.mostAfter)), "max-fds")
	require.LessOrEqual(b, run.mostBefore, maxOpenFiles+margin)
	require.LessOrEqual(b, run.mostAfter, maxOpenFiles+margin)
}

// idlePartitionBytes is the most heap an idle partition may cost its node,
// beyond the index entries of its active segment: its actor, mailbox, log,
// segments and metadata.
const idlePartitionBytes = 10 << 10

// TestIdlePartitionMemory creates 10,000 partitions on a node, writes a
// record to each and measures the node's heap per partition, once idle;
// then stops the node cleanly and restarts it, and measures again once
// every partition has opened in the background. Each stays under
// idlePartitionBytes. DEPOT_TEST_HEAP_PROFILE names a file to write the
// heap profile of the restarted node to.
func TestIdlePartitionMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("creates 10,000 partitions and restarts their node")
	}
	const topics, perTopic = 10, 1000
	cfg := testConfig(t, t.TempDir())
	cfg.HTTP = ""
	heap := func() uint64 {
		runtime.GC()
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	before := heap()
	n := startNode(t, cfg)
	empty := heap()
	for i := range topics {
		created := request[*messages.CreateTopicResponse](t, n, n.Metadata(), &messages.CreateTopicRequest{Name: fmt.Sprintf("idle-%d", i), Partitions: perTopic})
		require.Equal(t, messages.ErrorCode_NONE, created.Error, created.ErrorMessage)
	}
	records := actortest.Batch(t, "idle")
	var wg sync.WaitGroup
	errs := make(chan error, topics)
	for i := range topics {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := fmt.Sprintf("idle-%d", i)
			for p := range int32(perTopic) {
				pid := actor.NewPID(n.Address(), actors.PartitionActorName(name, p))
				resp, err := actors.Request[*messages.ProduceResponse](context.Background(), n.System().Root, pid,
					&messages.ProduceRequest{Topic: name, Partition: p, Acks: 1, Records: records}, requestTimeout)
				if err == nil && resp.Error != messages.ErrorCode_NONE {
					err = fmt.Errorf("%s-%d: %s", name, p, resp.ErrorMessage)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	const partitions = topics * perTopic
	idle := perPartition(heap(), empty, partitions)
	require.NoError(t, n.Stop())

	base := heap()
	n = startNode(t, cfg)
	require.Eventually(t, func() bool { return n.UnopenedPartitions() == 0 }, 5*time.Minute, 10*time.Millisecond)
	restarted := perPartition(heap(), base, partitions)
	if path := os.Getenv("DEPOT_TEST_HEAP_PROFILE"); path != "" {
		f, err := os.Create(path)
		require.NoError(t, err)
		require.NoError(t, pprof.WriteHeapProfile(f))
		require.NoError(t, f.Close())
	}
	t.Logf("heap per idle partition: %d bytes once written to, %d after a restart (a node with none: %d bytes)", idle, restarted, empty-before)
	require.Less(t, idle, int64(idlePartitionBytes))
	require.Less(t, restarted, int64(idlePartitionBytes))
}

// perPartition is the heap the partitions of a node cost each, from the
// heap with them and without.
func perPartition(with, without uint64, partitions int) int64 {
	return (int64(with) - int64(without)) / int64(partitions)
}
