package disks

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"

	"github.com/depot-dev/depot/actors"
	"github.com/depot-dev/depot/actors/actortest"
	"github.com/depot-dev/depot/disk"
)

const flusherTestTimeout = 10 * time.Second

func TestGatherPass(t *testing.T) {
	claimed := func() *Flush {
		f := NewFlush(nil, nil)
		f.claimed.Store(true)
		return f
	}
	a, b, c, d := NewFlush(nil, nil), NewFlush(nil, nil), NewFlush(nil, nil), claimed()
	for _, tc := range []struct {
		name        string
		waiting     []*Flush
		parallelism int
		pass        []*Flush
		workers     int
	}{
		{name: "nothing waits", parallelism: 4},
		{name: "fewer than the parallelism", waiting: []*Flush{a, b}, parallelism: 4, pass: []*Flush{a, b}, workers: 2},
		{name: "as many as the parallelism", waiting: []*Flush{a, b, c}, parallelism: 3, pass: []*Flush{a, b, c}, workers: 3},
		{name: "more than the parallelism", waiting: []*Flush{c, a, b}, parallelism: 2, pass: []*Flush{c, a, b}, workers: 2},
		{name: "one run by its partition is left out", waiting: []*Flush{a, d, b}, parallelism: 8, pass: []*Flush{a, b}, workers: 2},
		{name: "only claimed ones", waiting: []*Flush{d}, parallelism: 8},
		{name: "a parallelism under one runs one at a time", waiting: []*Flush{a, b}, parallelism: 0, pass: []*Flush{a, b}, workers: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pass, workers := gatherPass(tc.waiting, tc.parallelism)
			require.Equal(t, tc.pass, pass)
			require.Equal(t, tc.workers, workers)
		})
	}
}

// A Flush runs once: by whoever claims it first.
func TestFlushRunsOnce(t *testing.T) {
	system := actortest.System(t)
	got := make(chan *Flushed, 4)
	to := system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if m, ok := ctx.Message().(*Flushed); ok {
			got <- m
		}
	}))
	fs := newSyncFS(disk.NewMemFS())
	l := openTestLog(t, fs, "/data/t-0")
	appendValue(t, l, "a")
	job, err := l.StartFlush()
	require.NoError(t, err)

	f := NewFlush(job, to)
	require.False(t, f.Claimed())
	require.NoError(t, f.Wait(), "Wait runs a flush no one claimed")
	require.True(t, f.Claimed())
	require.False(t, f.Run(system.Root), "nor is it run again")
	require.NoError(t, f.Wait())
	require.Equal(t, 1, fs.syncCount())
	require.NoError(t, l.FinishFlush(job, nil))
	require.Equal(t, l.EndOffset(), l.RecoveryPoint())

	appendValue(t, l, "b")
	job, err = l.StartFlush()
	require.NoError(t, err)
	f = NewFlush(job, to)
	require.True(t, f.Run(system.Root))
	require.False(t, f.Run(system.Root))
	require.NoError(t, f.Wait(), "Wait waits for the run")
	select {
	case m := <-got:
		require.Same(t, f, m.Flush)
		require.NoError(t, m.Err)
	case <-time.After(flusherTestTimeout):
		require.FailNow(t, "Run sent no Flushed")
	}
	require.Equal(t, 2, fs.syncCount())
	require.NoError(t, l.FinishFlush(job, nil))
	require.Len(t, got, 0, "one Flushed for one run")
}

// flusherFixture is a flusher and logs on one file system, each with a
// value appended, whose flushes it is sent and answers to results.
type flusherFixture struct {
	system  *actor.ActorSystem
	flusher *actor.PID
	to      *actor.PID
	results chan *Flushed
	logs    []*disk.Log
	flushes map[*Flush]*disk.Log
}

func newFlusherFixture(t *testing.T, fs disk.FS, cfg FlusherConfig, logs int) *flusherFixture {
	t.Helper()
	system := actortest.System(t)
	f := &flusherFixture{
		system:  system,
		flusher: system.Root.Spawn(NewFlusherProps(cfg)),
		results: make(chan *Flushed, logs),
		flushes: map[*Flush]*disk.Log{},
	}
	f.to = system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if m, ok := ctx.Message().(*Flushed); ok {
			f.results <- m
		}
	}))
	for i := range logs {
		l := openTestLog(t, fs, fmt.Sprintf("/data/t-%d", i))
		appendValue(t, l, fmt.Sprint("value-", i))
		f.logs = append(f.logs, l)
	}
	return f
}

// send starts a flush of l and sends it to the flusher.
func (f *flusherFixture) send(t *testing.T, l *disk.Log) {
	t.Helper()
	job, err := l.StartFlush()
	require.NoError(t, err)
	flush := NewFlush(job, f.to)
	f.flushes[flush] = l
	f.system.Root.Send(f.flusher, flush)
}

// next returns the next answer and the log of its flush.
func (f *flusherFixture) next(t *testing.T) (*Flushed, *disk.Log) {
	t.Helper()
	select {
	case m := <-f.results:
		return m, f.flushes[m.Flush]
	case <-time.After(flusherTestTimeout):
		require.FailNow(t, "a flush was not answered")
		return nil, nil
	}
}

// The flushes that come while a pass runs are synced in the next one,
// together, on at most Parallelism goroutines at once; each log's result
// goes to its sender, and an fsync error is that log's alone.
func TestFlusherPasses(t *testing.T) {
	const logs, parallelism = 12, 3
	fs := newSyncFS(disk.NewMemFS())
	f := newFlusherFixture(t, fs, FlusherConfig{Parallelism: parallelism, Logger: quietLogger()}, logs+1)
	system, flusher, ls := f.system, f.flusher, f.logs
	send := func(l *disk.Log) { f.send(t, l) }
	failing := ls[5]
	fs.fail(failing.Dir())

	first, rest := fs.hold(ls[0].Dir()), fs.hold()
	send(ls[0]) // the first pass, held at its gate
	first.waitEntered(t, 1)
	for _, l := range ls[1:] {
		send(l)
	}
	status := waitStatus(t, system, flusher, func(s *FlusherStatusResponse) bool { return s.Waiting == logs })
	require.True(t, status.Passing)
	require.Equal(t, uint64(1), status.Passes)

	fs.release(first)
	rest.waitEntered(t, parallelism) // the second pass, held at the other gate
	status = waitStatus(t, system, flusher, func(s *FlusherStatusResponse) bool { return s.Waiting == 0 })
	require.True(t, status.Passing)
	require.Equal(t, uint64(2), status.Passes)
	fs.release(rest)
	seen := map[*disk.Log]bool{}
	for range logs + 1 {
		m, l := f.next(t)
		require.NotNil(t, l)
		require.False(t, seen[l], "one answer a flush")
		seen[l] = true
		err := l.FinishFlush(m.Flush.Job, m.Err)
		if l == failing {
			require.ErrorIs(t, m.Err, errInjectedSync)
			require.Error(t, err, "the log fails with its fsync")
			_, err = l.Append(actortest.Batch(t, "after"))
			require.Error(t, err)
			continue
		}
		require.NoError(t, m.Err, l.Dir())
		require.NoError(t, err)
		require.Equal(t, l.EndOffset(), l.RecoveryPoint(), l.Dir())
	}
	status = waitStatus(t, system, flusher, func(s *FlusherStatusResponse) bool { return !s.Passing })
	require.Equal(t, uint64(2), status.Passes, "the flushes that waited went in one pass")
	require.Equal(t, uint64(logs+1), status.Flushes)
	require.Equal(t, logs+1, fs.syncCount(), "one fsync a log")
	require.Equal(t, parallelism, fs.maxConcurrent(), "at most Parallelism fsyncs at once")
}

// TestFlusherSyncsManyAtOnce: a pass of FileSystemSyncFlushes flushes or
// more syncs their file system once, and then each file's writeback is
// checked: each log is durable as after its own fsync, and a failed
// writeback is that log's alone.
func TestFlusherSyncsManyAtOnce(t *testing.T) {
	const logs = 8
	mem := disk.NewMemFS()
	fs := newSyncFS(mem)
	f := newFlusherFixture(t, fs, FlusherConfig{FileSystemSyncFlushes: 4, Logger: quietLogger()}, logs+1)
	system, flusher, ls := f.system, f.flusher, f.logs
	send := func(l *disk.Log) { f.send(t, l) }
	failing := ls[3]
	fs.fail(failing.Dir())
	first := fs.hold(ls[0].Dir())
	send(ls[0]) // a pass of one, its own fsync, held
	first.waitEntered(t, 1)
	for _, l := range ls[1:] {
		send(l)
	}
	waitStatus(t, system, flusher, func(s *FlusherStatusResponse) bool { return s.Waiting == logs })
	fs.release(first)
	for range logs + 1 {
		m, l := f.next(t)
		err := l.FinishFlush(m.Flush.Job, m.Err)
		if l == failing {
			require.ErrorIs(t, m.Err, errInjectedSync)
			require.Error(t, err, "the log fails with its writeback")
			continue
		}
		require.NoError(t, m.Err, l.Dir())
		require.NoError(t, err)
		require.Equal(t, l.EndOffset(), l.RecoveryPoint(), l.Dir())
	}
	status := waitStatus(t, system, flusher, func(s *FlusherStatusResponse) bool { return !s.Passing })
	require.Equal(t, uint64(2), status.Passes)
	require.Equal(t, 1, fs.syncCount(), "only the pass of one synced its file")
	require.Equal(t, 1, fs.fileSystemSyncCount(), "the pass of many synced the file system once")

	for _, l := range ls {
		require.NoError(t, l.Close())
	}
	mem.Crash()
	for i, l := range ls {
		if l == failing {
			continue
		}
		reopened := openTestLog(t, mem, l.Dir())
		require.Equal(t, int64(1), reopened.EndOffset(), "log %d is durable", i)
	}
}

// A flusher that stops still runs the flushes waiting for it: their
// partitions are waiting for the results.
func TestStoppedFlusherRunsWaitingFlushes(t *testing.T) {
	system := actortest.System(t)
	fs := newSyncFS(disk.NewMemFS())
	flusher := system.Root.Spawn(NewFlusherProps(FlusherConfig{Logger: quietLogger()}))
	results := make(chan *Flushed, 2)
	to := system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if m, ok := ctx.Message().(*Flushed); ok {
			results <- m
		}
	}))
	var flushes []*Flush
	for i := range 2 {
		l := openTestLog(t, fs, fmt.Sprintf("/data/t-%d", i))
		appendValue(t, l, "v")
		job, err := l.StartFlush()
		require.NoError(t, err)
		flushes = append(flushes, NewFlush(job, to))
	}
	gate := fs.hold()
	system.Root.Send(flusher, flushes[0])
	gate.waitEntered(t, 1)
	system.Root.Send(flusher, flushes[1])
	waitStatus(t, system, flusher, func(s *FlusherStatusResponse) bool { return s.Waiting == 1 })
	require.NoError(t, system.Root.StopFuture(flusher).Wait())
	fs.release(gate)
	for range 2 {
		select {
		case m := <-results:
			require.NoError(t, m.Err)
		case <-time.After(flusherTestTimeout):
			require.FailNow(t, "a flush was left waiting by the flusher that stopped")
		}
	}
	require.Equal(t, 2, fs.syncCount())
}

// A log dir's flusher is its child, found from its PID.
func TestLogDirStartsItsFlusher(t *testing.T) {
	system := actortest.System(t)
	dir, err := system.Root.SpawnNamed(NewLogDirProps(LogDirConfig{
		Path: t.TempDir(), FS: disk.OS, UsageInterval: time.Hour, CheckpointInterval: time.Hour, Logger: quietLogger(),
	}), "logdir:test")
	require.NoError(t, err)
	// Answered once started, so with its flusher spawned.
	_, err = actors.Request[*WriteCheckpointsDone](t.Context(), system.Root, dir, &WriteCheckpoints{}, flusherTestTimeout)
	require.NoError(t, err)
	status, err := actors.Request[*FlusherStatusResponse](t.Context(), system.Root, FlusherOf(dir), &FlusherStatusRequest{}, flusherTestTimeout)
	require.NoError(t, err)
	require.Zero(t, status.Passes)
	require.Nil(t, FlusherOf(nil))
}

func waitStatus(t *testing.T, system *actor.ActorSystem, flusher *actor.PID, ok func(*FlusherStatusResponse) bool) *FlusherStatusResponse {
	t.Helper()
	deadline := time.Now().Add(flusherTestTimeout)
	for {
		status, err := actors.Request[*FlusherStatusResponse](t.Context(), system.Root, flusher, &FlusherStatusRequest{}, flusherTestTimeout)
		require.NoError(t, err)
		if ok(status) {
			return status
		}
		if time.Now().After(deadline) {
			require.FailNow(t, "flusher status never came", "%+v", status)
		}
		time.Sleep(time.Millisecond)
	}
}

func quietLogger() *logrus.Entry {
	logger := logrus.New()
	logger.SetLevel(logrus.ErrorLevel)
	return logrus.NewEntry(logger)
}

func openTestLog(t *testing.T, fs disk.FS, dir string) *disk.Log {
	t.Helper()
	l, err := disk.Open(fs, dir, disk.Options{Config: disk.DefaultConfig()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	return l
}

func appendValue(t *testing.T, l *disk.Log, value string) {
	t.Helper()
	_, err := l.Append(actortest.Batch(t, value))
	require.NoError(t, err)
}

var errInjectedSync = errors.New("injected fsync failure")

// syncFS counts the fsyncs of segment .log files, holds them at gates,
// tracks how many run at once, and fails those of the directories it is
// told to.
type syncFS struct {
	disk.FS
	mu         sync.Mutex
	gates      []*syncGate
	syncs      int
	fsSyncs    int // of the whole file system, by any file
	running    int
	maxRunning int
	failing    map[string]bool
}

// syncGate holds the fsyncs of the .log files in its dirs (of every file
// when it names none) until it is released.
type syncGate struct {
	dirs    map[string]bool
	open    chan struct{}
	entered chan struct{} // a value for each fsync that reached the gate
}

func newSyncFS(inner disk.FS) *syncFS {
	return &syncFS{FS: inner, failing: map[string]bool{}}
}

// hold closes a gate on the fsyncs of the files in dirs, or of every file:
// an fsync waits at the first gate held that covers its file.
func (s *syncFS) hold(dirs ...string) *syncGate {
	g := &syncGate{open: make(chan struct{}), entered: make(chan struct{}, 1024)}
	if len(dirs) > 0 {
		g.dirs = map[string]bool{}
		for _, d := range dirs {
			g.dirs[d] = true
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gates = append(s.gates, g)
	return g
}

func (s *syncFS) release(g *syncGate) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, held := range s.gates {
		if held == g {
			s.gates = append(s.gates[:i], s.gates[i+1:]...)
			close(g.open)
			return
		}
	}
}

// waitEntered waits for n fsyncs to reach g.
func (g *syncGate) waitEntered(t *testing.T, n int) {
	t.Helper()
	for i := range n {
		select {
		case <-g.entered:
		case <-time.After(flusherTestTimeout):
			require.FailNow(t, "fsyncs did not come", "%d of %d", i, n)
		}
	}
}

func (s *syncFS) fail(dir string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failing[dir] = true
}

func (s *syncFS) syncCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.syncs
}

func (s *syncFS) fileSystemSyncCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fsSyncs
}

func (s *syncFS) maxConcurrent() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.maxRunning
}

func (s *syncFS) OpenFile(name string, flag int, perm os.FileMode) (disk.File, error) {
	f, err := s.FS.OpenFile(name, flag, perm)
	if err != nil || !strings.HasSuffix(name, ".log") {
		return f, err
	}
	return &syncFile{File: f, fs: s, dir: filepath.Dir(name)}, nil
}

type syncFile struct {
	disk.File
	fs  *syncFS
	dir string
}

func (f *syncFile) Sync() error {
	s := f.fs
	s.mu.Lock()
	s.syncs++
	s.running++
	s.maxRunning = max(s.maxRunning, s.running)
	var gate *syncGate
	for _, g := range s.gates {
		if g.dirs == nil || g.dirs[f.dir] {
			gate = g
			break
		}
	}
	failing := s.failing[f.dir]
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.running--
		s.mu.Unlock()
	}()
	if gate != nil {
		gate.entered <- struct{}{}
		<-gate.open
	}
	if failing {
		return errInjectedSync
	}
	return f.File.Sync()
}

// fileSystemSyncer is what a disk.File of a MemFS does to sync its whole
// file system at once.
type fileSystemSyncer interface {
	SyncFileSystem() error
	CheckWriteback() error
}

func (f *syncFile) SyncFileSystem() error {
	f.fs.mu.Lock()
	f.fs.fsSyncs++
	f.fs.mu.Unlock()
	return f.File.(fileSystemSyncer).SyncFileSystem()
}

// CheckWriteback fails for the directories the syncFS fails.
func (f *syncFile) CheckWriteback() error {
	f.fs.mu.Lock()
	failing := f.fs.failing[f.dir]
	f.fs.mu.Unlock()
	if failing {
		return errInjectedSync
	}
	return f.File.(fileSystemSyncer).CheckWriteback()
}
