package partition

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"

	"github.com/depot-dev/depot/actors"
	"github.com/depot-dev/depot/actors/actortest"
	"github.com/depot-dev/depot/actors/disks"
	"github.com/depot-dev/depot/actors/topic"
	"github.com/depot-dev/depot/disk"
	"github.com/depot-dev/depot/messages"
	"github.com/depot-dev/depot/wire"
)

const moveTestTimeout = 20 * time.Second

// moveFixture is a partition actor on the first of two log directories,
// with recording actors in place of the log-dir actors.
type moveFixture struct {
	system  *actor.ActorSystem
	fs      disk.FS
	dirs    [2]string
	reports [2]chan *disks.PartitionReport
	logDirs [2]*actor.PID
	// flushers are the log dirs' flushers, nil until startFlushers: the
	// partitions it starts then run their group commits in their passes.
	flushers [2]*actor.PID
	pid      *actor.PID
	config   topic.Config
	hook     func(step string) error
	// flushes counts the group commits' flushes of the partitions it starts.
	flushes atomic.Int64
	// controller, when set, takes the partitions' ISR changes.
	controller *actor.PID
	logger     *logrus.Entry
	valueSeq   int
	// tickInterval is the partition's; 0 for the default.
	tickInterval time.Duration
	// now is the partition's clock; nil for the real one.
	now func() time.Time
	// metrics take the partitions' figures; nil for none.
	metrics *Metrics
	// files is the file cache of the partitions it starts; nil for none.
	files *disk.FileCache
}

func newMoveFixture(t *testing.T, segmentBytes int64, hook func(step string) error) *moveFixture {
	t.Helper()
	logger := logrus.New()
	logger.SetLevel(logrus.WarnLevel)
	f := &moveFixture{
		system: actortest.System(t),
		fs:     disk.OS,
		dirs:   [2]string{t.TempDir(), t.TempDir()},
		hook:   hook,
		logger: logrus.NewEntry(logger),
	}
	cfg, err := topic.ParseConfig(map[string]string{topic.ConfigSegmentBytes: fmt.Sprint(segmentBytes)})
	require.NoError(t, err)
	f.config = cfg
	for i := range f.dirs {
		ch := make(chan *disks.PartitionReport, 1024)
		f.reports[i] = ch
		var seq uint64
		pid, err := f.system.Root.SpawnNamed(actor.PropsFromFunc(func(ctx actor.Context) {
			if r, ok := ctx.Message().(*disks.PartitionReport); ok {
				if r.Awaiting && r.PID != nil {
					// A dir with no declared capacity: no limit.
					seq++
					ctx.Send(r.PID, &disks.DirAllowance{Token: r.Token, Seq: seq})
				}
				select {
				case ch <- r:
				default:
				}
			}
		}), fmt.Sprintf("logdir-%d", i))
		require.NoError(t, err)
		f.logDirs[i] = pid
	}
	f.start(t, f.dirs[0], 0)
	return f
}

// start spawns the partition actor on dir (which must be one of f.dirs).
func (f *moveFixture) start(t *testing.T, dir string, recoveryPoint int64) {
	t.Helper()
	i := 0
	if dir == f.dirs[1] {
		i = 1
	}
	pid, err := f.system.Root.SpawnNamed(NewPartitionProps(PartitionConfig{
		Topic: "orders", Partition: 0, FS: f.fs, Files: f.files, LogDir: dir, Config: f.config,
		RecoveryPoint: recoveryPoint, LogDirActor: f.logDirs[i], Flusher: f.flushers[i], Logger: f.logger, moveHook: f.hook,
		flushHook:    func() { f.flushes.Add(1) },
		Controller:   f.controller,
		TickInterval: f.tickInterval, Now: f.now, Metrics: f.metrics,
	}), fmt.Sprintf("orders-0-%d", time.Now().UnixNano()))
	require.NoError(t, err)
	f.pid = pid
}

// startFlushers spawns a flusher for each log dir, where
// disks.FlusherOf finds it, for the partitions started from now on.
func (f *moveFixture) startFlushers(t *testing.T) {
	t.Helper()
	for i, dir := range f.logDirs {
		pid, err := f.system.Root.SpawnNamed(disks.NewFlusherProps(disks.FlusherConfig{Logger: f.logger}), disks.FlusherOf(dir).Id)
		require.NoError(t, err)
		f.flushers[i] = pid
	}
}

func (f *moveFixture) stop(t *testing.T) {
	t.Helper()
	require.NoError(t, f.system.Root.PoisonFuture(f.pid).Wait())
}

func moveRequest[T any](t *testing.T, f *moveFixture, msg any) T {
	t.Helper()
	res, err := actors.Request[T](context.Background(), f.system.Root, f.pid, msg, moveTestTimeout)
	require.NoError(t, err)
	return res
}

func (f *moveFixture) batch(t *testing.T, values ...string) []byte {
	t.Helper()
	out, err := encodeBatch(values...)
	require.NoError(t, err)
	return out
}

// encodeBatch is one batch of values; safe to call off the test goroutine.
func encodeBatch(values ...string) ([]byte, error) {
	b := wire.NewBuilder(wire.NoProducer)
	for _, v := range values {
		b.Append(time.Now().UnixMilli(), nil, []byte(v), nil)
	}
	return b.AppendTo(nil)
}

// fill produces n batches of one record of about size bytes each.
func (f *moveFixture) fill(t *testing.T, n, size int) []string {
	t.Helper()
	var values []string
	for i := 0; i < n; i++ {
		v := fmt.Sprintf("fill-%06d-%0*d", f.valueSeq, size, 0)
		f.valueSeq++
		resp := moveRequest[*messages.ProduceResponse](t, f, &messages.ProduceRequest{Topic: "orders", Acks: 1, Records: f.batch(t, v)})
		require.Equal(t, messages.ErrorCode_NONE, resp.Error, resp.ErrorMessage)
		values = append(values, v)
	}
	return values
}

// readAll fetches every record from offset 0 and checks offsets are dense.
func (f *moveFixture) readAll(t *testing.T) []string {
	t.Helper()
	return f.readFrom(t, 0)
}

// readFrom fetches every record from start and checks offsets are dense.
func (f *moveFixture) readFrom(t *testing.T, start int64) []string {
	t.Helper()
	var values []string
	for offset := start; ; {
		resp := moveRequest[*messages.FetchResponse](t, f, &messages.FetchRequest{Topic: "orders", Offset: offset, MaxBytes: 1 << 20})
		require.Equal(t, messages.ErrorCode_NONE, resp.Error, resp.ErrorMessage)
		if len(resp.Records) == 0 {
			require.Equal(t, resp.HighWatermark, offset)
			return values
		}
		_, err := wire.Batches(resp.Records, func(batch []byte, _ wire.Header) error {
			return wire.Records(batch, func(r wire.Record) error {
				require.Equal(t, offset, r.Offset, "offsets are dense")
				offset++
				values = append(values, string(r.Value))
				return nil
			})
		})
		require.NoError(t, err)
	}
}

// entries lists a directory.
func (f *moveFixture) entries(t *testing.T, dir string) []string {
	t.Helper()
	names, err := f.fs.ReadDir(dir)
	require.NoError(t, err)
	return names
}

func (f *moveFixture) move(t *testing.T, throttle int64) *messages.MovePartitionResponse {
	t.Helper()
	return moveRequest[*messages.MovePartitionResponse](t, f, &messages.MovePartitionRequest{TargetDir: f.dirs[1], TargetLogDirActor: f.logDirs[1].Id, ThrottleBytesPerS: throttle})
}

func TestMoveUnderProduceAndFetch(t *testing.T) {
	f := newMoveFixture(t, 64<<10, nil)
	before := f.fill(t, 1500, 300) // about 500 KB in several segments

	ctx, stopProducing := context.WithCancel(context.Background())
	var (
		mu       sync.Mutex
		produced = append([]string(nil), before...)
		wg       sync.WaitGroup
		errs     = make(chan error, 2)
	)
	wg.Add(1)
	go func() { // acks=1 mostly, acks=all every tenth batch, values increasing
		defer wg.Done()
		for i := 0; ctx.Err() == nil; i++ {
			v := fmt.Sprintf("live-%06d", i)
			acks := int32(1)
			if i%10 == 0 {
				acks = -1
			}
			records, err := encodeBatch(v)
			if err != nil {
				errs <- err
				return
			}
			res, err := f.system.Root.RequestFuture(f.pid, &messages.ProduceRequest{Topic: "orders", Acks: acks, Records: records}, moveTestTimeout).Result()
			if err != nil {
				errs <- err
				return
			}
			if resp := res.(*messages.ProduceResponse); resp.Error != messages.ErrorCode_NONE {
				errs <- fmt.Errorf("produce %s: %s %s", v, resp.Error, resp.ErrorMessage)
				return
			}
			mu.Lock()
			produced = append(produced, v)
			mu.Unlock()
			time.Sleep(200 * time.Microsecond)
		}
	}()
	consumed := make(chan []string, 1)
	consumerDone := make(chan struct{})
	go func() { // long-polling consumer, until it has read all there is after consumerDone
		var values []string
		offset := int64(0)
		for {
			res, err := f.system.Root.RequestFuture(f.pid, &messages.FetchRequest{Topic: "orders", Offset: offset, MaxBytes: 64 << 10, MinBytes: 1, MaxWaitMs: 50}, moveTestTimeout).Result()
			if err != nil {
				errs <- err
				consumed <- values
				return
			}
			resp := res.(*messages.FetchResponse)
			if resp.Error != messages.ErrorCode_NONE {
				errs <- fmt.Errorf("fetch at %d: %s %s", offset, resp.Error, resp.ErrorMessage)
				consumed <- values
				return
			}
			_, err = wire.Batches(resp.Records, func(batch []byte, _ wire.Header) error {
				return wire.Records(batch, func(r wire.Record) error {
					if r.Offset != offset {
						return fmt.Errorf("offset %d where %d was due", r.Offset, offset)
					}
					offset++
					values = append(values, string(r.Value))
					return nil
				})
			})
			if err != nil {
				errs <- err
				consumed <- values
				return
			}
			select {
			case <-consumerDone:
				if len(resp.Records) == 0 && offset == resp.HighWatermark {
					consumed <- values
					return
				}
			default:
			}
		}
	}()

	// A throttled move takes long enough to overlap with the traffic.
	moveDone := make(chan *messages.MovePartitionResponse, 1)
	go func() {
		res, err := f.system.Root.RequestFuture(f.pid, &messages.MovePartitionRequest{TargetDir: f.dirs[1], TargetLogDirActor: f.logDirs[1].Id, ThrottleBytesPerS: 2 << 20}, moveTestTimeout).Result()
		if err != nil {
			errs <- err
			moveDone <- nil
			return
		}
		moveDone <- res.(*messages.MovePartitionResponse)
	}()
	var sawMoving, sawFuture bool
	var resp *messages.MovePartitionResponse
	for resp == nil {
		select {
		case resp = <-moveDone:
		case <-time.After(10 * time.Millisecond):
			st := moveRequest[*messages.PartitionStatusResponse](t, f, &messages.PartitionStatusRequest{})
			if st.MovingTo != "" {
				require.Equal(t, f.dirs[1], st.MovingTo)
				require.Equal(t, f.dirs[0], st.LogDir)
				require.LessOrEqual(t, st.MoveFutureEndOffset, st.LogEndOffset, "the future log is behind the log, or caught up")
				require.LessOrEqual(t, st.MoveFutureBytes, st.MoveCopiedBytes)
				sawMoving = true
				sawFuture = sawFuture || (st.MoveFutureEndOffset > 0 && st.MoveFutureBytes > 0)
			}
		}
	}
	require.NotNil(t, resp)
	require.Equal(t, messages.ErrorCode_NONE, resp.Error, resp.ErrorMessage)
	require.True(t, sawMoving, "status showed the move while it ran")
	require.True(t, sawFuture, "status showed the future log's end offset and bytes")
	require.Equal(t, f.dirs[0], resp.FromDir)
	require.Equal(t, f.dirs[1], resp.ToDir)
	require.Greater(t, resp.BytesCopied, int64(500<<10))

	// Traffic goes on after the swap, then stops.
	mu.Lock()
	atSwap := len(produced)
	mu.Unlock()
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(produced) > atSwap+100
	}, moveTestTimeout, time.Millisecond)
	stopProducing()
	wg.Wait()
	close(consumerDone)
	got := <-consumed
	select {
	case err := <-errs:
		require.NoError(t, err)
	default:
	}
	require.Greater(t, len(produced), len(before)+100, "records were produced during the move")
	require.Equal(t, produced, got, "every acknowledged record once, in order")
	require.Equal(t, produced, f.readAll(t))

	st := moveRequest[*messages.PartitionStatusResponse](t, f, &messages.PartitionStatusRequest{})
	require.Equal(t, f.dirs[1], st.LogDir)
	require.Empty(t, st.MovingTo)
	require.Equal(t, int64(len(produced)), st.LogEndOffset)
	require.Empty(t, f.entries(t, f.dirs[0]), "no copy left in the old dir")
	require.Equal(t, []string{"orders-0"}, f.entries(t, f.dirs[1]))

	// The old log dir heard that the partition left, the new one that it came.
	requireReport(t, f.reports[0], func(r *disks.PartitionReport) bool { return r.Deleted })
	requireReport(t, f.reports[1], func(r *disks.PartitionReport) bool { return !r.Deleted && r.RecoveryPoint > 0 })

	// After a restart the partition is found in the new dir.
	f.stop(t)
	plan, err := disks.RecoverMoves([]disks.LogDirListing{{Dir: f.dirs[0], Names: f.entries(t, f.dirs[0])}, {Dir: f.dirs[1], Names: f.entries(t, f.dirs[1])}})
	require.NoError(t, err)
	require.Empty(t, plan.Actions)
	require.Equal(t, f.dirs[1], plan.Locations[disk.TopicPartition{Topic: "orders", Partition: 0}])
	f.start(t, f.dirs[1], 0)
	require.Equal(t, produced, f.readAll(t))
}

func requireReport(t *testing.T, ch chan *disks.PartitionReport, match func(*disks.PartitionReport) bool) {
	t.Helper()
	deadline := time.After(moveTestTimeout)
	for {
		select {
		case r := <-ch:
			if match(r) {
				return
			}
		case <-deadline:
			t.Fatal("no matching report")
		}
	}
}

func TestMoveKeepsParkedFetch(t *testing.T) {
	f := newMoveFixture(t, 1<<20, nil)
	values := f.fill(t, 10, 100)
	parked := f.system.Root.RequestFuture(f.pid, &messages.FetchRequest{Topic: "orders", Offset: 10, MaxBytes: 1 << 20, MinBytes: 1, MaxWaitMs: 10_000}, moveTestTimeout)
	// The status request is answered after the fetch was parked.
	moveRequest[*messages.PartitionStatusResponse](t, f, &messages.PartitionStatusRequest{})
	resp := f.move(t, 0)
	require.Equal(t, messages.ErrorCode_NONE, resp.Error, resp.ErrorMessage)
	values = append(values, f.fill(t, 1, 10)...)
	res, err := parked.Result()
	require.NoError(t, err)
	fetched := res.(*messages.FetchResponse)
	require.Equal(t, messages.ErrorCode_NONE, fetched.Error)
	require.NotEmpty(t, fetched.Records, "the fetch parked before the move is answered by the data produced after it")
	require.Equal(t, values, f.readAll(t))
}

func TestMoveRequestsRefused(t *testing.T) {
	f := newMoveFixture(t, 1<<20, nil)
	f.fill(t, 200, 1000)

	same := moveRequest[*messages.MovePartitionResponse](t, f, &messages.MovePartitionRequest{TargetDir: f.dirs[0]})
	require.Equal(t, messages.ErrorCode_NONE, same.Error)
	require.Zero(t, same.BytesCopied)

	empty := moveRequest[*messages.MovePartitionResponse](t, f, &messages.MovePartitionRequest{})
	require.Equal(t, messages.ErrorCode_INVALID_REQUEST, empty.Error)

	// A slow move runs while a second is refused.
	first := f.system.Root.RequestFuture(f.pid, &messages.MovePartitionRequest{TargetDir: f.dirs[1], ThrottleBytesPerS: 400 << 10}, moveTestTimeout)
	second := f.move(t, 0)
	require.Equal(t, messages.ErrorCode_INVALID_REQUEST, second.Error)
	require.Contains(t, second.ErrorMessage, "already running")
	res, err := first.Result()
	require.NoError(t, err)
	require.Equal(t, messages.ErrorCode_NONE, res.(*messages.MovePartitionResponse).Error)

	// Back to the first dir works too; moving onto an existing copy does not.
	back := moveRequest[*messages.MovePartitionResponse](t, f, &messages.MovePartitionRequest{TargetDir: f.dirs[0]})
	require.Equal(t, messages.ErrorCode_NONE, back.Error, back.ErrorMessage)
	require.NoError(t, f.fs.MkdirAll(filepath.Join(f.dirs[1], "orders-0"), 0o755))
	taken := f.move(t, 0)
	require.Equal(t, messages.ErrorCode_INVALID_REQUEST, taken.Error)
	require.Contains(t, taken.ErrorMessage, "already exists")
}

func TestMoveFailsAtEachStep(t *testing.T) {
	errInjected := errors.New("injected")
	for _, step := range []string{moveStepCopy, moveStepS2, moveStepS3} {
		t.Run(step, func(t *testing.T) {
			f := newMoveFixture(t, 64<<10, func(s string) error {
				if s == step {
					return errInjected
				}
				return nil
			})
			values := f.fill(t, 300, 500)
			resp := f.move(t, 0)
			require.Equal(t, messages.ErrorCode_KAFKA_STORAGE_ERROR, resp.Error)
			require.Contains(t, resp.ErrorMessage, "injected")

			// The partition stays where it was, whole, and the future is gone.
			st := moveRequest[*messages.PartitionStatusResponse](t, f, &messages.PartitionStatusRequest{})
			require.Equal(t, messages.ErrorCode_NONE, st.Error, st.ErrorMessage)
			require.Equal(t, f.dirs[0], st.LogDir)
			require.Empty(t, st.MovingTo)
			require.Equal(t, []string{"orders-0"}, f.entries(t, f.dirs[0]))
			require.Empty(t, f.entries(t, f.dirs[1]))
			values = append(values, f.fill(t, 5, 10)...)
			require.Equal(t, values, f.readAll(t))

			// A later move succeeds.
			f.hook = nil
			f.stop(t)
			f.start(t, f.dirs[0], 0)
			resp = f.move(t, 0)
			require.Equal(t, messages.ErrorCode_NONE, resp.Error, resp.ErrorMessage)
			require.Equal(t, values, f.readAll(t))
		})
	}
	t.Run(moveStepS4, func(t *testing.T) {
		f := newMoveFixture(t, 64<<10, func(s string) error {
			if s == moveStepS4 {
				return errInjected
			}
			return nil
		})
		values := f.fill(t, 100, 500)
		// Past S3 the move has happened: only the old copy is left over,
		// for start-up recovery to remove.
		resp := f.move(t, 0)
		require.Equal(t, messages.ErrorCode_NONE, resp.Error, resp.ErrorMessage)
		require.Equal(t, []string{"orders-0.delete"}, f.entries(t, f.dirs[0]))
		require.Equal(t, values, f.readAll(t))
		plan, err := disks.RecoverMoves([]disks.LogDirListing{{Dir: f.dirs[0], Names: f.entries(t, f.dirs[0])}, {Dir: f.dirs[1], Names: f.entries(t, f.dirs[1])}})
		require.NoError(t, err)
		require.Equal(t, []disks.MoveAction{{Kind: disks.MoveRemove, Path: filepath.Join(f.dirs[0], "orders-0.delete")}}, plan.Actions)
	})
}

func TestMoveThrottle(t *testing.T) {
	f := newMoveFixture(t, 1<<20, nil)
	f.fill(t, 600, 1000) // about 640 KB
	st := moveRequest[*messages.PartitionStatusResponse](t, f, &messages.PartitionStatusRequest{})
	const throttle = 1 << 20 // bytes per second
	started := time.Now()
	resp := f.move(t, throttle)
	took := time.Since(started)
	require.Equal(t, messages.ErrorCode_NONE, resp.Error, resp.ErrorMessage)
	require.Equal(t, st.SizeBytes, resp.BytesCopied)
	least := time.Duration(float64(st.SizeBytes) / throttle * float64(time.Second) / 2)
	require.GreaterOrEqual(t, took, least, "a move of %d bytes at %d bytes/s", st.SizeBytes, throttle)
	t.Logf("moved %d bytes at a throttle of %d bytes/s in %v", st.SizeBytes, throttle, took)
}

func TestMoveStopsWithPartition(t *testing.T) {
	f := newMoveFixture(t, 1<<20, nil)
	f.fill(t, 300, 1000)
	running := f.system.Root.RequestFuture(f.pid, &messages.MovePartitionRequest{TargetDir: f.dirs[1], ThrottleBytesPerS: 100 << 10}, moveTestTimeout)
	require.Eventually(t, func() bool {
		return moveRequest[*messages.PartitionStatusResponse](t, f, &messages.PartitionStatusRequest{}).MoveCopiedBytes > 0
	}, moveTestTimeout, 5*time.Millisecond)
	f.stop(t)
	res, err := running.Result()
	require.NoError(t, err)
	require.Equal(t, messages.ErrorCode_NOT_LEADER_OR_FOLLOWER, res.(*messages.MovePartitionResponse).Error)
	require.Empty(t, f.entries(t, f.dirs[1]), "the future is removed")
	require.Equal(t, []string{"orders-0"}, f.entries(t, f.dirs[0]))
}

func TestMoveSurvivesActorRestart(t *testing.T) {
	var panicNow atomic.Bool
	f := newMoveFixture(t, 64<<10, func(step string) error {
		if panicNow.Load() {
			panic("hook panics at " + step)
		}
		return nil
	})
	values := f.fill(t, 200, 500)
	resp := f.move(t, 0)
	require.Equal(t, messages.ErrorCode_NONE, resp.Error, resp.ErrorMessage)

	// The actor fails during a move back and is restarted by its
	// supervisor: the failed move is answered, and the new incarnation
	// opens the log where it lives now.
	panicNow.Store(true)
	back := moveRequest[*messages.MovePartitionResponse](t, f, &messages.MovePartitionRequest{TargetDir: f.dirs[0]})
	require.NotEqual(t, messages.ErrorCode_NONE, back.Error)
	panicNow.Store(false)
	st := moveRequest[*messages.PartitionStatusResponse](t, f, &messages.PartitionStatusRequest{})
	require.Equal(t, messages.ErrorCode_NONE, st.Error, st.ErrorMessage)
	require.Equal(t, f.dirs[1], st.LogDir)
	require.Equal(t, values, f.readAll(t))
	require.Empty(t, f.entries(t, f.dirs[0]))
}

// epochBatch is a batch of values as a leader of epoch epoch sends it, at
// base offset base.
func epochBatch(t *testing.T, epoch int32, base int64, values ...string) []byte {
	t.Helper()
	b, err := encodeBatch(values...)
	require.NoError(t, err)
	wire.SetLeaderEpoch(b, epoch)
	wire.SetBaseOffset(b, base)
	return b
}

// appendAsFollower appends batches to log as a follower does.
func appendAsFollower(t *testing.T, log *disk.Log, batches ...[]byte) {
	t.Helper()
	for _, b := range batches {
		h, err := wire.Validate(b)
		require.NoError(t, err)
		_, err = log.AppendAsFollower(b, h)
		require.NoError(t, err)
	}
}

// A move keeps the batches' leader epochs byte for byte and the source's
// leader-epoch cache, with an epoch that holds no batch.
func TestMoveKeepsLeaderEpochs(t *testing.T) {
	f := newMoveFixture(t, 300, nil)
	f.stop(t)
	source := PartitionDir(f.dirs[0], "orders", 0)
	log, err := disk.Open(f.fs, source, disk.Options{Config: f.config.Log, LeaderEpoch: disk.NoLeaderEpoch})
	require.NoError(t, err)
	batches := [][]byte{
		epochBatch(t, disk.NoLeaderEpoch, 0, "a", "b"),
		epochBatch(t, 0, 2, "c"),
		epochBatch(t, 0, 3, "d", "e"),
		epochBatch(t, 3, 5, "f"),
		epochBatch(t, 3, 6, "g", "h", "i"),
	}
	appendAsFollower(t, log, batches...)
	require.NoError(t, log.AssignEpoch(5, 9), "a leader that took the partition and appended nothing")
	want := []disk.EpochEntry{{Epoch: 0, StartOffset: 2}, {Epoch: 3, StartOffset: 5}, {Epoch: 5, StartOffset: 9}}
	require.Equal(t, want, log.Epochs())
	require.GreaterOrEqual(t, len(log.Segments()), 2, "the copy crosses segments")
	require.NoError(t, log.Close())

	f.start(t, f.dirs[0], 9)
	resp := f.move(t, 0)
	require.Equal(t, messages.ErrorCode_NONE, resp.Error, resp.ErrorMessage)
	require.Equal(t, []string{"a", "b", "c", "d", "e", "f", "g", "h", "i"}, f.readAll(t))
	f.stop(t)

	moved, err := disk.Open(f.fs, PartitionDir(f.dirs[1], "orders", 0), disk.Options{Config: f.config.Log, LeaderEpoch: disk.NoLeaderEpoch, RecoveryPoint: 9})
	require.NoError(t, err)
	require.Equal(t, want, moved.Epochs())
	got, err := moved.Read(0, 1<<20, nil)
	require.NoError(t, err)
	var stored []byte
	for _, b := range batches {
		stored = append(stored, b...)
	}
	require.Equal(t, stored, got, "the batches are the source's, byte for byte")
	epoch, end := moved.EndOffsetForEpoch(3)
	require.Equal(t, int32(3), epoch)
	require.Equal(t, int64(9), end)
	require.NoError(t, moved.Close())
}

func TestTruncateFuture(t *testing.T) {
	a := &partitionActor{}
	require.NoError(t, a.truncateFuture(3), "no move, nothing to do")

	fs := disk.NewMemFS()
	future, err := disk.Open(fs, "/d/orders-0.future", disk.Options{Config: disk.DefaultConfig(), LeaderEpoch: disk.NoLeaderEpoch})
	require.NoError(t, err)
	appendAsFollower(t, future,
		epochBatch(t, 0, 0, "a", "b"),
		epochBatch(t, 0, 2, "c"),
		epochBatch(t, 2, 3, "d", "e"),
		epochBatch(t, 4, 5, "f"),
	)
	a.move = &partitionMove{future: future}
	for _, tt := range []struct {
		offset int64
		end    int64
		epochs []disk.EpochEntry
	}{
		{8, 6, []disk.EpochEntry{{Epoch: 0, StartOffset: 0}, {Epoch: 2, StartOffset: 3}, {Epoch: 4, StartOffset: 5}}},
		{6, 6, []disk.EpochEntry{{Epoch: 0, StartOffset: 0}, {Epoch: 2, StartOffset: 3}, {Epoch: 4, StartOffset: 5}}},
		{5, 5, []disk.EpochEntry{{Epoch: 0, StartOffset: 0}, {Epoch: 2, StartOffset: 3}}},
		{4, 3, []disk.EpochEntry{{Epoch: 0, StartOffset: 0}}},
		{5, 3, []disk.EpochEntry{{Epoch: 0, StartOffset: 0}}},
		{1, 0, []disk.EpochEntry{}},
	} {
		require.NoError(t, a.truncateFuture(tt.offset), "to %d", tt.offset)
		require.Equal(t, tt.end, future.EndOffset(), "to %d", tt.offset)
		if len(tt.epochs) == 0 {
			require.Empty(t, future.Epochs(), "to %d", tt.offset)
		} else {
			require.Equal(t, tt.epochs, future.Epochs(), "to %d", tt.offset)
		}
	}
	// The copy goes on from where the future ends.
	appendAsFollower(t, future, epochBatch(t, 6, 0, "x"))
	require.Equal(t, []disk.EpochEntry{{Epoch: 6, StartOffset: 0}}, future.Epochs())

	require.NoError(t, future.Close())
	err = a.truncateFuture(0)
	require.ErrorIs(t, err, disk.ErrClosed, "a failed truncation is the caller's to handle")
	require.Contains(t, err.Error(), "/d/orders-0.future")
}
