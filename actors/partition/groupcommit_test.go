package partition

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/depot-dev/depot/disk"
	"github.com/depot-dev/depot/messages"
	"github.com/depot-dev/depot/wire"
)

// gatedFS holds the fsyncs of segment .log files at a gate while it is
// closed, counts them, and fails them while failing is set.
type gatedFS struct {
	disk.FS
	mu      sync.Mutex
	closed  bool
	open    chan struct{} // closed when the gate opens
	entered chan struct{} // one value per fsync that reached the gate
	syncs   int
	failing bool
}

func newGatedFS(inner disk.FS) *gatedFS {
	return &gatedFS{FS: inner, entered: make(chan struct{}, 64)}
}

// close makes the next fsyncs wait until reopen.
func (g *gatedFS) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closed, g.open = true, make(chan struct{})
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
	closed, open, failing := g.closed, g.open, g.failing
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

// produceAsync sends a produce request; its answer arrives on the channel.
// newGatedFixture is a move fixture whose partition runs on a gated file
// system over mem. The fixture's own partition, on the OS's file system, is
// stopped first.
func newGatedFixture(t *testing.T, mem *disk.MemFS) (*moveFixture, *gatedFS) {
	t.Helper()
	f := newMoveFixture(t, 1<<20, nil)
	f.stop(t)
	g := newGatedFS(mem)
	f.fs = g
	f.start(t, f.dirs[0], 0)
	return f, g
}

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
	mem := disk.NewMemFS()
	f, g := newGatedFixture(t, mem)

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
	f, g := newGatedFixture(t, disk.NewMemFS())

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
func TestGroupCommitFsyncFailure(t *testing.T) {
	f, g := newGatedFixture(t, disk.NewMemFS())

	g.setFailing(true)
	resp := <-produceAsync(t, f, -1, "x")
	require.Equal(t, messages.ErrorCode_KAFKA_STORAGE_ERROR, resp.Error)
	require.Contains(t, resp.ErrorMessage, errSyncFailed.Error())
	g.setFailing(false)
	resp = <-produceAsync(t, f, 1, "y")
	require.Equal(t, messages.ErrorCode_KAFKA_STORAGE_ERROR, resp.Error, "the log failed with the fsync")
}
