package partition

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/require"

	"github.com/depot-dev/depot/actors"
	"github.com/depot-dev/depot/actors/disks"
	"github.com/depot-dev/depot/disk"
	"github.com/depot-dev/depot/messages"
	"github.com/depot-dev/depot/wire"
)

// flusherFixture is a move fixture's system and first log dir, holding
// partitions 0..n-1 of "orders" on fs, whose group commits go to the log
// dir's flusher.
type flusherFixture struct {
	*moveFixture
	partitions []*actor.PID
}

func newFlusherFixture(t *testing.T, fs disk.FS, n int) *flusherFixture {
	t.Helper()
	f := newMoveFixture(t, 1<<20, nil)
	f.stop(t)
	f.fs = fs
	f.startFlushers(t)
	ff := &flusherFixture{moveFixture: f}
	for p := range n {
		ff.partitions = append(ff.partitions, ff.spawn(t, int32(p), f.flushers[0]))
	}
	return ff
}

// spawn starts partition p of "orders" on the first log dir, with flusher.
func (f *flusherFixture) spawn(t *testing.T, p int32, flusher *actor.PID) *actor.PID {
	t.Helper()
	pid, err := f.system.Root.SpawnNamed(NewPartitionProps(PartitionConfig{
		Topic: "orders", Partition: p, FS: f.fs, LogDir: f.dirs[0], Config: f.config,
		LogDirActor: f.logDirs[0], Flusher: flusher, Logger: f.logger,
	}), fmt.Sprintf("orders-%d-%d", p, time.Now().UnixNano()))
	require.NoError(t, err)
	return pid
}

// produce sends a produce request of values to partition p; its answer
// arrives on the channel.
func (f *flusherFixture) produce(t *testing.T, p int, acks int32, values ...string) chan *messages.ProduceResponse {
	t.Helper()
	records, err := encodeBatch(values...)
	require.NoError(t, err)
	fut := f.system.Root.RequestFuture(f.partitions[p], &messages.ProduceRequest{Topic: "orders", Partition: int32(p), Acks: acks, Records: records}, moveTestTimeout)
	out := make(chan *messages.ProduceResponse, 1)
	go func() { out <- produceResult(fut) }()
	return out
}

func produceResult(fut *actor.Future) *messages.ProduceResponse {
	res, err := fut.Result()
	resp, _ := res.(*messages.ProduceResponse)
	if err != nil || resp == nil {
		resp = &messages.ProduceResponse{Error: messages.ErrorCode_REQUEST_TIMED_OUT, ErrorMessage: fmt.Sprintf("no answer: %v (%T)", err, res)}
	}
	return resp
}

func (f *flusherFixture) status(t *testing.T, p int) *messages.PartitionStatusResponse {
	t.Helper()
	resp, err := actors.Request[*messages.PartitionStatusResponse](context.Background(), f.system.Root, f.partitions[p], &messages.PartitionStatusRequest{}, moveTestTimeout)
	require.NoError(t, err)
	return resp
}

// waitFlusher polls the first log dir's flusher until ok holds of its
// status: nothing else tells what waits in it.
func (f *flusherFixture) waitFlusher(t *testing.T, ok func(*disks.FlusherStatusResponse) bool) *disks.FlusherStatusResponse {
	t.Helper()
	deadline := time.Now().Add(moveTestTimeout)
	for {
		status, err := actors.Request[*disks.FlusherStatusResponse](context.Background(), f.system.Root, f.flushers[0], &disks.FlusherStatusRequest{}, moveTestTimeout)
		require.NoError(t, err)
		if ok(status) {
			return status
		}
		if time.Now().After(deadline) {
			require.FailNow(t, "the flusher never got there", "%+v", status)
		}
		time.Sleep(time.Millisecond)
	}
}

func (f *flusherFixture) partitionDir(p int) string {
	return PartitionDir(f.dirs[0], "orders", int32(p))
}

// waitAnswer waits for answer and returns it.
func waitAnswer(t *testing.T, answer chan *messages.ProduceResponse, what string) *messages.ProduceResponse {
	t.Helper()
	select {
	case resp := <-answer:
		return resp
	case <-time.After(moveTestTimeout):
		require.FailNow(t, what+" not answered")
		return nil
	}
}

// The acks=all produces parked in many partitions while a pass runs are
// answered after the next pass, which syncs each partition's file once.
func TestFlusherAnswersManyPartitionsInOnePass(t *testing.T) {
	const n = 20
	g := newGatedFS(disk.NewMemFS())
	f := newFlusherFixture(t, g, n+1)

	// Partition 0's flush is the first pass, held at the gate; the others'
	// wait for the next one.
	g.close()
	first := f.produce(t, 0, -1, "first")
	select {
	case <-g.entered:
	case <-time.After(moveTestTimeout):
		require.FailNow(t, "no fsync started for acks=all")
	}
	answers := make([]chan *messages.ProduceResponse, n+1)
	for p := 1; p <= n; p++ {
		answers[p] = f.produce(t, p, -1, fmt.Sprint("value-", p))
	}
	status := f.waitFlusher(t, func(s *disks.FlusherStatusResponse) bool { return s.Waiting == n })
	require.True(t, status.Passing)
	require.Equal(t, uint64(1), status.Passes)
	requireNotAnswered(t, answers[n], "a produce of the second pass")
	syncsBefore := g.syncCount()

	g.reopen()
	resp := waitAnswer(t, first, "the first pass's produce")
	require.Equal(t, messages.ErrorCode_NONE, resp.Error, resp.ErrorMessage)
	for p := 1; p <= n; p++ {
		resp := waitAnswer(t, answers[p], fmt.Sprint("partition ", p))
		require.Equal(t, messages.ErrorCode_NONE, resp.Error, resp.ErrorMessage)
		require.Equal(t, int64(0), resp.BaseOffset)
		require.Equal(t, int64(1), f.status(t, p).RecoveryPoint, "partition %d is durable", p)
	}
	status = f.waitFlusher(t, func(s *disks.FlusherStatusResponse) bool { return !s.Passing })
	require.Equal(t, uint64(2), status.Passes, "one pass for every partition that waited")
	require.Equal(t, uint64(n+1), status.Flushes)
	require.Equal(t, n, g.syncCount()-syncsBefore, "one fsync a partition")
}

// An fsync that fails in a pass fails the partitions whose files failed:
// their produces are answered with a storage error and their logs fail.
// The other partitions of the pass are answered as usual and go on.
func TestFlusherFsyncErrorFailsOnlyItsPartitions(t *testing.T) {
	const n = 6
	g := newGatedFS(disk.NewMemFS())
	f := newFlusherFixture(t, g, n)
	failing := map[int]bool{2: true, 4: true}
	for p := range failing {
		g.failDir(f.partitionDir(p))
	}

	g.close()
	first := f.produce(t, 0, -1, "first")
	<-g.entered
	answers := make([]chan *messages.ProduceResponse, n)
	for p := 1; p < n; p++ {
		answers[p] = f.produce(t, p, -1, fmt.Sprint("value-", p))
	}
	f.waitFlusher(t, func(s *disks.FlusherStatusResponse) bool { return s.Waiting == n-1 })
	g.reopen()
	resp := waitAnswer(t, first, "the first pass's produce")
	require.Equal(t, messages.ErrorCode_NONE, resp.Error, resp.ErrorMessage)
	for p := 1; p < n; p++ {
		resp := waitAnswer(t, answers[p], fmt.Sprint("partition ", p))
		if failing[p] {
			require.Equal(t, messages.ErrorCode_KAFKA_STORAGE_ERROR, resp.Error, "partition %d", p)
			require.Contains(t, resp.ErrorMessage, errSyncFailed.Error())
			continue
		}
		require.Equal(t, messages.ErrorCode_NONE, resp.Error, "partition %d: %s", p, resp.ErrorMessage)
	}
	status := f.waitFlusher(t, func(s *disks.FlusherStatusResponse) bool { return !s.Passing })
	require.Equal(t, uint64(2), status.Passes)

	for p := range n {
		resp := waitAnswer(t, f.produce(t, p, 1, "after"), fmt.Sprint("partition ", p))
		if failing[p] {
			require.Equal(t, messages.ErrorCode_KAFKA_STORAGE_ERROR, resp.Error, "partition %d: its log failed with its fsync", p)
			continue
		}
		require.Equal(t, messages.ErrorCode_NONE, resp.Error, "partition %d: %s", p, resp.ErrorMessage)
		require.Equal(t, int64(1), resp.BaseOffset)
	}
}

// Nothing is acknowledged before its bytes are synced: produces to many
// partitions, acks=all and acks=1 mixed, run until the file system crashes
// in the middle of them, with fsyncs held at a gate, and every acks=all
// record acknowledged before the crash is in the logs opened after it.
func TestFlusherAcknowledgesOnlySyncedRecords(t *testing.T) {
	const partitions, producers, acknowledgedBeforeCrash = 8, 6, 150
	mem := disk.NewMemFS()
	g := newGatedFS(mem)
	f := newFlusherFixture(t, g, partitions)

	var mu sync.Mutex
	crashed := false
	acknowledged := map[int][]string{}
	var wg sync.WaitGroup
	for w := range producers {
		wg.Go(func() {
			for i := 0; ; i++ {
				mu.Lock()
				done := crashed
				mu.Unlock()
				if done {
					return
				}
				p := (w + i) % partitions
				acks := int32(-1)
				if i%3 == 2 {
					acks = 1
				}
				values := []string{fmt.Sprintf("w%d-r%d-a", w, i), fmt.Sprintf("w%d-r%d-b", w, i)}
				records, err := encodeBatch(values...)
				if err != nil {
					panic(err)
				}
				fut := f.system.Root.RequestFuture(f.partitions[p], &messages.ProduceRequest{Topic: "orders", Partition: int32(p), Acks: acks, Records: records}, moveTestTimeout)
				resp := produceResult(fut)
				mu.Lock()
				if !crashed && acks == -1 && resp.Error == messages.ErrorCode_NONE {
					acknowledged[p] = append(acknowledged[p], values...)
				}
				mu.Unlock()
			}
		})
	}
	// Once enough acks=all records are acknowledged, the fsyncs are held
	// at the gate, and the file system crashes while one is: an answer
	// that did not wait for its fsync has had the time to come. The
	// answers recorded before the crash are all that count, and the
	// producers stop at it.
	deadline := time.Now().Add(moveTestTimeout)
	for {
		mu.Lock()
		count := 0
		for _, values := range acknowledged {
			count += len(values)
		}
		mu.Unlock()
		if count >= acknowledgedBeforeCrash {
			break
		}
		require.False(t, time.Now().After(deadline), "too few produces acknowledged: %d", count)
		time.Sleep(time.Millisecond)
	}
	g.close()
	select {
	case <-g.entered:
	case <-time.After(moveTestTimeout):
		require.FailNow(t, "no fsync reached the gate")
	}
	time.Sleep(150 * time.Millisecond)
	mu.Lock()
	mem.Crash()
	crashed = true
	mu.Unlock()
	g.reopen()
	wg.Wait()

	total := 0
	for p := range partitions {
		l, err := disk.Open(mem, f.partitionDir(p), disk.Options{Config: f.config.Log})
		require.NoError(t, err)
		present := map[string]bool{}
		batches, err := l.Read(0, 1<<30, nil)
		require.NoError(t, err)
		_, err = wire.Batches(batches, func(batch []byte, h wire.Header) error {
			return wire.Records(batch, func(r wire.Record) error {
				present[string(r.Value)] = true
				return nil
			})
		})
		require.NoError(t, err)
		for _, v := range acknowledged[p] {
			require.True(t, present[v], "partition %d lost %s, acknowledged before the crash", p, v)
		}
		total += len(acknowledged[p])
		require.NoError(t, l.Close())
	}
	require.Greater(t, total, 0)
}

// A partition whose flusher is not there syncs its own files: the flush
// comes back as a dead letter.
func TestPartitionSyncsItselfWithoutItsFlusher(t *testing.T) {
	f := newFlusherFixture(t, disk.NewMemFS(), 0)
	f.partitions = append(f.partitions, f.spawn(t, 0, actor.NewPID(f.system.Address(), "no-such-flusher")))
	for i := range 3 {
		resp := waitAnswer(t, f.produce(t, 0, -1, fmt.Sprint("value-", i)), "acks=all")
		require.Equal(t, messages.ErrorCode_NONE, resp.Error, resp.ErrorMessage)
		require.Equal(t, int64(i), resp.BaseOffset)
		require.Equal(t, int64(i+1), f.status(t, 0).RecoveryPoint)
	}
}

// A partition that stops while its flush waits for the flusher's next pass
// runs the flush itself, answers its parked produce, and closes; the pass
// does not run the flush again.
func TestPartitionStopsWithItsFlushWaitingForAPass(t *testing.T) {
	g := newGatedFS(disk.NewMemFS())
	f := newFlusherFixture(t, g, 2)

	g.closeOnly(f.partitionDir(0))
	first := f.produce(t, 0, -1, "held")
	<-g.entered
	parked := f.produce(t, 1, -1, "waiting")
	f.waitFlusher(t, func(s *disks.FlusherStatusResponse) bool { return s.Waiting == 1 })

	require.NoError(t, f.system.Root.PoisonFuture(f.partitions[1]).Wait())
	resp := waitAnswer(t, parked, "the parked produce of the stopped partition")
	require.Equal(t, messages.ErrorCode_NONE, resp.Error, resp.ErrorMessage)

	g.reopen()
	resp = waitAnswer(t, first, "the held produce")
	require.Equal(t, messages.ErrorCode_NONE, resp.Error, resp.ErrorMessage)
	status := f.waitFlusher(t, func(s *disks.FlusherStatusResponse) bool { return !s.Passing })
	require.Equal(t, uint64(1), status.Passes, "the stopped partition's flush ran once, not in a pass")

	f.partitions[1] = f.spawn(t, 1, f.flushers[0])
	resp = waitAnswer(t, f.produce(t, 1, 1, "after"), "a produce after the restart")
	require.Equal(t, messages.ErrorCode_NONE, resp.Error, resp.ErrorMessage)
	require.Equal(t, int64(1), resp.BaseOffset, "the record of the stopped partition is there")
}
