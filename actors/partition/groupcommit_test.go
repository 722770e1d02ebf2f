package partition

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/depot-dev/depot/actors/disks"
	"github.com/depot-dev/depot/actors/topic"
	"github.com/depot-dev/depot/disk"
	"github.com/depot-dev/depot/messages"
	"github.com/depot-dev/depot/wire"
)

// gatedFS holds the fsyncs of segment .log files at a gate while it is
// closed, counts them, and fails them while failing is set, or those of
// the directories in failingDirs.
type gatedFS struct {
	disk.FS
	mu      sync.Mutex
	closed  bool
	only    string        // the directory whose files the gate holds; "" for all
	open    chan struct{} // closed when the gate opens
	entered chan struct{} // one value per fsync that reached the gate
	syncs   int
	failing bool
	// failingDirs are directories whose files' fsyncs fail.
	failingDirs map[string]bool
}

func newGatedFS(inner disk.FS) *gatedFS {
	return &gatedFS{FS: inner, entered: make(chan struct{}, 1024), failingDirs: map[string]bool{}}
}

// close makes the next fsyncs wait until reopen.
func (g *gatedFS) close() { g.closeOnly("") }

// closeOnly makes the next fsyncs of the files in dir wait until reopen.
func (g *gatedFS) closeOnly(dir string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closed, g.only, g.open = true, dir, make(chan struct{})
}

// failDir makes the fsyncs of the files in dir fail.
func (g *gatedFS) failDir(dir string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.failingDirs[dir] = true
}

func (g *gatedFS) reopen() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		g.closed = false
		close(g.open)
	}
}

func (g *gatedFS) setFailing(on bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.failing = on
}

func (g *gatedFS) syncCount() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.syncs
}

func (g *gatedFS) OpenFile(name string, flag int, perm os.FileMode) (disk.File, error) {
	f, err := g.FS.OpenFile(name, flag, perm)
	if err != nil || !strings.HasSuffix(name, ".log") {
		return f, err
	}
	return &gatedFile{File: f, fs: g}, nil
}

type gatedFile struct {
	disk.File
	fs *gatedFS
}

var errSyncFailed = errors.New("injected fsync failure")

func (f *gatedFile) Sync() error {
	g := f.fs
	g.mu.Lock()
	g.syncs++
	dir := filepath.Dir(f.Name())
	closed := g.closed && (g.only == "" || g.only == dir)
	open, failing := g.open, g.failing || g.failingDirs[dir]
	g.mu.Unlock()
	if closed {
		g.entered <- struct{}{}
		<-open
	}
	if failing {
		return errSyncFailed
	}
	return f.File.Sync()
}

// newGatedFixture is a move fixture whose partition runs on a gated file
// system over mem, with the log dirs' flushers when flushers is set. The
// fixture's own partition, on the OS's file system, is stopped first.
func newGatedFixture(t *testing.T, mem *disk.MemFS, flushers bool) (*moveFixture, *gatedFS) {
	t.Helper()
	f := newMoveFixture(t, 1<<20, nil)
	f.stop(t)
	if flushers {
		f.startFlushers(t)
	}
	g := newGatedFS(mem)
	f.fs = g
	f.start(t, f.dirs[0], 0)
	return f, g
}

// produceAsync sends a produce request; its answer arrives on the channel.
func produceAsync(t *testing.T, f *moveFixture, acks int32, values ...string) chan *messages.ProduceResponse {
	t.Helper()
	fut := f.system.Root.RequestFuture(f.pid, &messages.ProduceRequest{Topic: "orders", Acks: acks, Records: f.batch(t, values...)}, moveTestTimeout)
	out := make(chan *messages.ProduceResponse, 1)
	go func() {
		res, err := fut.Result()
		resp, _ := res.(*messages.ProduceResponse)
		if err != nil || resp == nil {
			resp = &messages.ProduceResponse{Error: messages.ErrorCode_REQUEST_TIMED_OUT, ErrorMessage: fmt.Sprintf("no answer: %v (%T)", err, res)}
		}
		out <- resp
	}()
	return out
}

// forEachFlushMode runs test with partitions that run their own fsyncs,
// and with partitions whose log dirs' flushers run them.
func forEachFlushMode(t *testing.T, test func(t *testing.T, flushers bool)) {
	t.Run("own fsyncs", func(t *testing.T) { test(t, false) })
	t.Run("flusher", func(t *testing.T) { test(t, true) })
}

// requireNotAnswered checks that answer stays empty for a while.
func requireNotAnswered(t *testing.T, answer chan *messages.ProduceResponse, what string) {
	t.Helper()
	select {
	case resp := <-answer:
		require.FailNow(t, what+" answered before its fsync", "%v", resp)
	case <-time.After(150 * time.Millisecond):
	}
}

// TestGroupCommitAppendsDuringFsync: while the fsync of one acks=all group
// runs, the partition goes on appending and answering acks=1; the acks=all
// requests that arrive meanwhile wait for an fsync of their own, and every
// acknowledged record survives a crash.
func TestGroupCommitAppendsDuringFsync(t *testing.T) {
	forEachFlushMode(t, testGroupCommitAppendsDuringFsync)
}

func testGroupCommitAppendsDuringFsync(t *testing.T, flushers bool) {
	mem := disk.NewMemFS()
	f, g := newGatedFixture(t, mem, flushers)

	g.close()
	first := produceAsync(t, f, -1, "a0", "a1")
	select {
	case <-g.entered:
	case <-time.After(moveTestTimeout):
		require.FailNow(t, "no fsync started for acks=all")
	}

	// The fsync is held: an acks=1 produce is appended and answered anyway.
	resp := moveRequest[*messages.ProduceResponse](t, f, &messages.ProduceRequest{Topic: "orders", Acks: 1, Records: f.batch(t, "b")})
	require.Equal(t, messages.ErrorCode_NONE, resp.Error, resp.ErrorMessage)
	require.Equal(t, int64(2), resp.BaseOffset)
	second := produceAsync(t, f, -1, "c")
	requireNotAnswered(t, first, "the first acks=all produce")
	requireNotAnswered(t, second, "the second acks=all produce")
	status := moveRequest[*messages.PartitionStatusResponse](t, f, &messages.PartitionStatusRequest{})
	require.Equal(t, int64(0), status.RecoveryPoint)
	require.Equal(t, int64(4), status.LogEndOffset)

	syncsBefore := g.syncCount()
	g.reopen()
	resp = <-first
	require.Equal(t, messages.ErrorCode_NONE, resp.Error, resp.ErrorMessage)
	require.Equal(t, int64(0), resp.BaseOffset)
	resp = <-second
	require.Equal(t, messages.ErrorCode_NONE, resp.Error, resp.ErrorMessage)
	require.Equal(t, int64(3), resp.BaseOffset)
	require.Greater(t, g.syncCount(), syncsBefore, "the second group had an fsync of its own")
	status = moveRequest[*messages.PartitionStatusResponse](t, f, &messages.PartitionStatusRequest{})
	require.Equal(t, int64(4), status.RecoveryPoint)

	// Everything acknowledged as durable is there after a crash.
	mem.Crash()
	l, err := disk.Open(mem, PartitionDir(f.dirs[0], "orders", 0), disk.Options{Config: f.config.Log})
	require.NoError(t, err)
	var values []string
	batches, err := l.Read(0, 1<<20, nil)
	require.NoError(t, err)
	_, err = wire.Batches(batches, func(batch []byte, h wire.Header) error {
		return wire.Records(batch, func(r wire.Record) error {
			values = append(values, string(r.Value))
			return nil
		})
	})
	require.NoError(t, err)
	require.Equal(t, []string{"a0", "a1", "b", "c"}, values)
}

// TestGroupCommitStopWaitsForFsync: a partition stopped while an fsync
// runs waits for it and answers the parked produce before its log closes.
func TestGroupCommitStopWaitsForFsync(t *testing.T) {
	forEachFlushMode(t, testGroupCommitStopWaitsForFsync)
}

func testGroupCommitStopWaitsForFsync(t *testing.T, flushers bool) {
	f, g := newGatedFixture(t, disk.NewMemFS(), flushers)

	g.close()
	parked := produceAsync(t, f, -1, "x")
	<-g.entered
	stopped := make(chan error, 1)
	go func() { stopped <- f.system.Root.PoisonFuture(f.pid).Wait() }()
	select {
	case <-stopped:
		require.FailNow(t, "the partition stopped with an fsync in flight")
	case <-time.After(150 * time.Millisecond):
	}
	g.reopen()
	require.NoError(t, <-stopped)
	resp := <-parked
	require.Equal(t, messages.ErrorCode_NONE, resp.Error, resp.ErrorMessage)

	f.start(t, f.dirs[0], 1)
	require.Equal(t, []string{"x"}, f.readAll(t))
}

// TestGroupCommitFsyncFailure: a failed fsync answers the waiting acks=all
// produces with a storage error and fails the log, so nothing is
// acknowledged after it.
func TestGroupCommitFsyncFailure(t *testing.T) { forEachFlushMode(t, testGroupCommitFsyncFailure) }

func testGroupCommitFsyncFailure(t *testing.T, flushers bool) {
	f, g := newGatedFixture(t, disk.NewMemFS(), flushers)

	g.setFailing(true)
	resp := <-produceAsync(t, f, -1, "x")
	require.Equal(t, messages.ErrorCode_KAFKA_STORAGE_ERROR, resp.Error)
	require.Contains(t, resp.ErrorMessage, errSyncFailed.Error())
	g.setFailing(false)
	resp = <-produceAsync(t, f, 1, "y")
	require.Equal(t, messages.ErrorCode_KAFKA_STORAGE_ERROR, resp.Error, "the log failed with the fsync")
}

// TestWorkDeferredDuringFsync: a DeleteRecordsRequest and a retention tick
// that arrive while an fsync is held wait for its end, since the log
// removes no segment during one; the partition answers produce and fetch
// requests meanwhile, and the delete once the fsync has returned.
func TestWorkDeferredDuringFsync(t *testing.T) { forEachFlushMode(t, testWorkDeferredDuringFsync) }

func testWorkDeferredDuringFsync(t *testing.T, flushers bool) {
	f := newMoveFixture(t, 4<<10, nil)
	f.stop(t)
	if flushers {
		f.startFlushers(t)
	}
	g := newGatedFS(disk.NewMemFS())
	f.fs = g
	cfg, err := topic.ParseConfig(map[string]string{topic.ConfigSegmentBytes: "4096", topic.ConfigRetentionBytes: "8192"})
	require.NoError(t, err)
	f.config = cfg
	f.tickInterval = time.Hour // the test sends the ticks
	f.start(t, f.dirs[0], 0)
	values := f.fill(t, 40, 1000) // about ten segments, over retention.bytes
	before := moveRequest[*messages.PartitionStatusResponse](t, f, &messages.PartitionStatusRequest{})
	require.Equal(t, int64(0), before.LogStartOffset)
	require.Greater(t, before.SizeBytes, int64(8192))
	// StartFlush syncs the segments sealed since the last flush itself,
	// and only the active one in the job: a flush now leaves the next one
	// nothing but the active segment to hold.
	synced := <-produceAsync(t, f, -1, "synced")
	require.Equal(t, messages.ErrorCode_NONE, synced.Error, synced.ErrorMessage)

	g.close()
	parked := produceAsync(t, f, -1, "held")
	select {
	case <-g.entered:
	case <-time.After(moveTestTimeout):
		require.FailNow(t, "no fsync started for acks=all")
	}
	deleted := make(chan *messages.DeleteRecordsResponse, 1)
	deleteFuture := f.system.Root.RequestFuture(f.pid, &messages.DeleteRecordsRequest{Topic: "orders", Offset: 5}, moveTestTimeout)
	go func() {
		res, _ := deleteFuture.Result()
		resp, _ := res.(*messages.DeleteRecordsResponse)
		deleted <- resp
	}()
	f.system.Root.Send(f.pid, &partitionTick{})

	// The fsync is held: produce and fetch are answered, nothing is deleted.
	for i := range 3 {
		resp := moveRequest[*messages.ProduceResponse](t, f, &messages.ProduceRequest{Topic: "orders", Acks: 1, Records: f.batch(t, fmt.Sprint("during-", i))})
		require.Equal(t, messages.ErrorCode_NONE, resp.Error, resp.ErrorMessage)
		require.Equal(t, int64(42+i), resp.BaseOffset)
	}
	fetched := moveRequest[*messages.FetchResponse](t, f, &messages.FetchRequest{Topic: "orders", Offset: 0, MaxBytes: 1 << 20})
	require.Equal(t, messages.ErrorCode_NONE, fetched.Error, fetched.ErrorMessage)
	require.NotEmpty(t, fetched.Records, "offset 0 is still there")
	require.Equal(t, int64(45), fetched.HighWatermark)
	during := moveRequest[*messages.PartitionStatusResponse](t, f, &messages.PartitionStatusRequest{})
	require.Equal(t, int64(0), during.LogStartOffset, "no segment deleted during the fsync")
	require.GreaterOrEqual(t, during.SizeBytes, before.SizeBytes)
	select {
	case resp := <-deleted:
		require.FailNow(t, "delete records answered during the fsync", "%v", resp)
	case <-time.After(150 * time.Millisecond):
	}
	requireNotAnswered(t, parked, "the acks=all produce")

	g.reopen()
	resp := <-parked
	require.Equal(t, messages.ErrorCode_NONE, resp.Error, resp.ErrorMessage)
	require.Equal(t, int64(41), resp.BaseOffset)
	var del *messages.DeleteRecordsResponse
	select {
	case del = <-deleted:
	case <-time.After(moveTestTimeout):
		require.FailNow(t, "delete records not answered after the fsync")
	}
	require.NotNil(t, del, "delete records answered")
	require.Equal(t, messages.ErrorCode_NONE, del.Error, del.ErrorMessage)
	require.Equal(t, int64(5), del.LowWatermark)

	// Retention ran after the delete, in the same turn.
	after := moveRequest[*messages.PartitionStatusResponse](t, f, &messages.PartitionStatusRequest{})
	require.Greater(t, after.LogStartOffset, int64(5), "retention deleted segments after the fsync")
	require.LessOrEqual(t, after.SizeBytes, int64(8192)+4096)
	out := moveRequest[*messages.FetchResponse](t, f, &messages.FetchRequest{Topic: "orders", Offset: 0, MaxBytes: 1 << 20})
	require.Equal(t, messages.ErrorCode_OFFSET_OUT_OF_RANGE, out.Error)

	values = append(values, "synced", "held", "during-0", "during-1", "during-2")
	got := f.readFrom(t, after.LogStartOffset)
	require.Equal(t, values[after.LogStartOffset:], got)
}

// TestMoveSwapWaitsForFsync: a move that catches up while an fsync is held
// swaps once it has returned, after copying what was appended meanwhile;
// the partition answers produce requests while the move waits.
func TestMoveSwapWaitsForFsync(t *testing.T) { forEachFlushMode(t, testMoveSwapWaitsForFsync) }

func testMoveSwapWaitsForFsync(t *testing.T, flushers bool) {
	f, g := newGatedFixture(t, disk.NewMemFS(), flushers)
	values := f.fill(t, 50, 500)

	g.close()
	parked := produceAsync(t, f, -1, "held")
	<-g.entered
	moved := make(chan *messages.MovePartitionResponse, 1)
	moveFuture := f.system.Root.RequestFuture(f.pid, &messages.MovePartitionRequest{TargetDir: f.dirs[1], TargetLogDirActor: f.logDirs[1].Id}, moveTestTimeout)
	go func() {
		res, _ := moveFuture.Result()
		resp, _ := res.(*messages.MovePartitionResponse)
		moved <- resp
	}()
	// The copy steps run between these produces, and catch up.
	for i := range 20 {
		resp := moveRequest[*messages.ProduceResponse](t, f, &messages.ProduceRequest{Topic: "orders", Acks: 1, Records: f.batch(t, fmt.Sprint("during-", i))})
		require.Equal(t, messages.ErrorCode_NONE, resp.Error, resp.ErrorMessage)
	}
	status := moveRequest[*messages.PartitionStatusResponse](t, f, &messages.PartitionStatusRequest{})
	require.Equal(t, f.dirs[1], status.MovingTo)
	require.Equal(t, f.dirs[0], status.LogDir, "no swap during the fsync")
	select {
	case resp := <-moved:
		require.FailNow(t, "move answered during the fsync", "%v", resp)
	case <-time.After(150 * time.Millisecond):
	}

	g.reopen()
	resp := <-parked
	require.Equal(t, messages.ErrorCode_NONE, resp.Error, resp.ErrorMessage)
	var move *messages.MovePartitionResponse
	select {
	case move = <-moved:
	case <-time.After(moveTestTimeout):
		require.FailNow(t, "move not answered after the fsync")
	}
	require.NotNil(t, move)
	require.Equal(t, messages.ErrorCode_NONE, move.Error, move.ErrorMessage)
	status = moveRequest[*messages.PartitionStatusResponse](t, f, &messages.PartitionStatusRequest{})
	require.Equal(t, f.dirs[1], status.LogDir)
	values = append(values, "held")
	for i := range 20 {
		values = append(values, fmt.Sprint("during-", i))
	}
	require.Equal(t, values, f.readAll(t))
}

// TestDeleteDuringFsync: a partition deleted while an fsync is held answers
// its parked acks=all produce at once, and every request after, as deleted;
// its directory goes when the fsync has returned.
func TestDeleteDuringFsync(t *testing.T) { forEachFlushMode(t, testDeleteDuringFsync) }

func testDeleteDuringFsync(t *testing.T, flushers bool) {
	mem := disk.NewMemFS()
	f, g := newGatedFixture(t, mem, flushers)
	f.fill(t, 5, 100)

	g.close()
	parked := produceAsync(t, f, -1, "held")
	<-g.entered
	f.system.Root.Send(f.pid, &deletePartition{})
	resp := <-parked
	require.Equal(t, messages.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION, resp.Error, resp.ErrorMessage)
	resp = <-produceAsync(t, f, 1, "after")
	require.Equal(t, messages.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION, resp.Error, resp.ErrorMessage)
	require.Equal(t, []string{"orders-0"}, f.entries(t, f.dirs[0]), "the files stay while the fsync runs")

	g.reopen()
	requireReport(t, f.reports[0], func(r *disks.PartitionReport) bool { return r.Deleted })
	require.Empty(t, f.entries(t, f.dirs[0]))
	f.stop(t)
}

// An acks=all produce that waits for a follower, not for the disk, costs
// one fsync: the partition does not sync again and again while it waits,
// and answers REQUEST_TIMED_OUT once its timeout passes.
func TestWaitingForFollowersSyncsOnce(t *testing.T) {
	f := newMoveFixture(t, 1<<20, nil)
	f.system.Root.Send(f.pid, &messages.PartitionState{Topic: "orders", Leader: 0, LeaderEpoch: 1, Replicas: []int32{0, 2}, Isr: []int32{0, 2}})
	before := f.flushes.Load()
	start := time.Now()
	resp := moveRequest[*messages.ProduceResponse](t, f, &messages.ProduceRequest{Topic: "orders", Acks: -1, TimeoutMs: 300, Records: f.batch(t, "a")})
	require.Equal(t, messages.ErrorCode_REQUEST_TIMED_OUT, resp.Error, resp.ErrorMessage)
	require.GreaterOrEqual(t, time.Since(start), 300*time.Millisecond)
	require.Equal(t, int64(1), f.flushes.Load()-before, "one flush for the batch; the wait for the follower makes none")
}
