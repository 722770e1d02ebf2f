package partition

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"

	"github.com/depot-dev/depot/actors"
	"github.com/depot-dev/depot/actors/actortest"
	"github.com/depot-dev/depot/actors/disks"
	"github.com/depot-dev/depot/actors/remote"
	"github.com/depot-dev/depot/actors/topic"
	"github.com/depot-dev/depot/disk"
	"github.com/depot-dev/depot/messages"
)

const backgroundTestTimeout = 20 * time.Second

// listingFS counts the listings of each directory, which a log's open
// makes once (disk.Open lists its segments), and holds those of one
// directory at a gate until it opens.
type listingFS struct {
	disk.FS
	mu       sync.Mutex
	listings map[string]int
	gated    string
	entered  chan struct{} // a value when a listing reaches the gate
	release  chan struct{} // closed when the gate opens
}

func newListingFS(inner disk.FS) *listingFS {
	return &listingFS{FS: inner, listings: map[string]int{}, entered: make(chan struct{}, 16), release: make(chan struct{})}
}

func (l *listingFS) ReadDir(name string) ([]string, error) {
	l.mu.Lock()
	l.listings[name]++
	gated := name == l.gated
	l.mu.Unlock()
	if gated {
		l.entered <- struct{}{}
		<-l.release
	}
	return l.FS.ReadDir(name)
}

// opens is how many times the log in dir was opened.
func (l *listingFS) opens(dir string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.listings[dir]
}

// backgroundFixture runs partition managers over one log directory of a
// memory file system, whose log-dir actor keeps the partitions' reports.
type backgroundFixture struct {
	system  *actor.ActorSystem
	mem     *disk.MemFS
	dir     string
	logDir  *actor.PID
	reports chan *disks.PartitionReport
	config  topic.Config
}

func newBackgroundFixture(t *testing.T, segmentBytes int64) *backgroundFixture {
	t.Helper()
	f := &backgroundFixture{system: actortest.System(t), mem: disk.NewMemFS(), dir: "/data/a", reports: make(chan *disks.PartitionReport, 1024)}
	cfg, err := topic.ParseConfig(map[string]string{topic.ConfigSegmentBytes: fmt.Sprint(segmentBytes)})
	require.NoError(t, err)
	f.config = cfg
	var seq uint64
	f.logDir, err = f.system.Root.SpawnNamed(actor.PropsFromFunc(func(ctx actor.Context) {
		if r, ok := ctx.Message().(*disks.PartitionReport); ok {
			if r.Awaiting && r.PID != nil {
				seq++
				ctx.Send(r.PID, &disks.DirAllowance{Token: r.Token, Seq: seq})
			}
			f.reports <- r
		}
	}), "logdir-background")
	require.NoError(t, err)
	_, err = f.system.Root.SpawnNamed(disks.NewFlusherProps(disks.FlusherConfig{Logger: logrus.NewEntry(actortest.Logger(t, logrus.WarnLevel))}), disks.FlusherOf(f.logDir).Id)
	require.NoError(t, err)
	return f
}

// manager spawns a partition manager over fsys, with recovery points
// read from a checkpoint.
func (f *backgroundFixture) manager(t *testing.T, fsys disk.FS, opens int, recoveryPoints map[disk.TopicPartition]int64, metrics *Metrics) *actor.PID {
	t.Helper()
	return f.system.Root.Spawn(NewPartitionManagerProps(PartitionManagerConfig{
		FS: fsys, NodeID: 1, Transport: remote.NewTransport(),
		LogDirs:         map[string]*actor.PID{f.dir: f.logDir},
		Checkpoints:     map[string]disks.Checkpoints{f.dir: {RecoveryPoints: recoveryPoints, LogStart: map[disk.TopicPartition]int64{}}},
		BackgroundOpens: opens,
		TickInterval:    time.Hour, // no tick syncs behind the test's back
		Metrics:         metrics,
		Logger:          logrus.NewEntry(actortest.Logger(t, logrus.WarnLevel)),
	}))
}

// start starts partitions t-0 to t-(n-1), alone in their partitions but
// for those in replicated, which have a follower on node 2.
func (f *backgroundFixture) start(t *testing.T, manager *actor.PID, n int, replicated ...int32) {
	t.Helper()
	req := &messages.StartPartitionsRequest{Configs: map[string]string{topic.ConfigSegmentBytes: fmt.Sprint(f.config.Log.SegmentBytes)}}
	for i := range int32(n) {
		p := &messages.PartitionAssignment{Topic: "t", Partition: i, NodeId: 1, LogDir: f.dir}
		for _, r := range replicated {
			if r == i {
				p.Leader, p.LeaderEpoch, p.Replicas, p.Isr = 1, 1, []int32{1, 2}, []int32{1, 2}
			}
		}
		req.Partitions = append(req.Partitions, p)
	}
	resp, err := actors.Request[*messages.StartPartitionsResponse](context.Background(), f.system.Root, manager, req, backgroundTestTimeout)
	require.NoError(t, err)
	require.Equal(t, messages.ErrorCode_NONE, resp.GetError(), resp.GetErrorMessage())
}

// stop stops manager and its partitions, which close their logs.
func (f *backgroundFixture) stop(t *testing.T, manager *actor.PID) {
	t.Helper()
	_, err := actors.Request[*messages.StopPartitionsResponse](context.Background(), f.system.Root, manager, &StopAllPartitions{}, backgroundTestTimeout)
	require.NoError(t, err)
	require.NoError(t, f.system.Root.StopFuture(manager).Wait())
}

func partitionPID(manager *actor.PID, i int32) *actor.PID {
	return actor.NewPID(manager.Address, manager.Id+"/"+disk.PartitionDirName(disk.TopicPartition{Topic: "t", Partition: i}))
}

func (f *backgroundFixture) produce(t *testing.T, manager *actor.PID, i int32, acks int32, values ...string) *messages.ProduceResponse {
	t.Helper()
	records, err := encodeBatch(values...)
	require.NoError(t, err)
	resp, err := actors.Request[*messages.ProduceResponse](context.Background(), f.system.Root, partitionPID(manager, i),
		&messages.ProduceRequest{Topic: "t", Partition: i, Acks: acks, TimeoutMs: 10_000, Records: records}, backgroundTestTimeout)
	require.NoError(t, err)
	require.Equal(t, messages.ErrorCode_NONE, resp.GetError(), resp.GetErrorMessage())
	return resp
}

func (f *backgroundFixture) partitionDir(i int32) string { return PartitionDir(f.dir, "t", i) }

// After a restart, partitions started in the background open their logs a
// few at a time; one asked for before its turn opens on that request,
// which gets its answer, while the background work is held up on another;
// a partition with a follower opens at once; and once the held one opens,
// the rest follow and none is left unopened.
func TestBackgroundStartAnswersRequestsBeforeItsTurn(t *testing.T) {
	f := newBackgroundFixture(t, 1<<20)
	const n = 6
	first := f.manager(t, f.mem, 0, nil, nil)
	f.start(t, first, n)
	for i := range int32(n) {
		f.produce(t, first, i, -1, fmt.Sprintf("before-%d", i))
	}
	f.stop(t, first)

	fsys := newListingFS(f.mem)
	fsys.gated = f.partitionDir(0)
	metrics := NewMetrics(prometheus.NewRegistry())
	restarted := f.manager(t, fsys, 1, nil, metrics)
	f.start(t, restarted, n, 5)
	select {
	case <-fsys.entered:
	case <-time.After(backgroundTestTimeout):
		t.Fatal("the background work did not open t-0")
	}
	for i := int32(1); i < 4; i++ {
		require.Zero(t, fsys.opens(f.partitionDir(i)), "t-%d waits its turn behind t-0", i)
	}

	// A produce, a fetch and a list-offsets, each to a partition not yet
	// open: each opens it and is answered from its log.
	resp := f.produce(t, restarted, 3, 1, "after-3")
	require.Equal(t, int64(1), resp.BaseOffset, "appended after the record the log held")
	fetched, err := actors.Request[*messages.FetchResponse](context.Background(), f.system.Root, partitionPID(restarted, 2),
		&messages.FetchRequest{Topic: "t", Partition: 2, MaxBytes: 1 << 20}, backgroundTestTimeout)
	require.NoError(t, err)
	require.Equal(t, messages.ErrorCode_NONE, fetched.Error, fetched.ErrorMessage)
	require.Equal(t, []string{"before-2"}, valuesOf(t, fetched.Records))
	listed, err := actors.Request[*messages.ListOffsetsResponse](context.Background(), f.system.Root, partitionPID(restarted, 1),
		&messages.ListOffsetsRequest{Topic: "t", Partition: 1, Timestamp: -1}, backgroundTestTimeout)
	require.NoError(t, err)
	require.Equal(t, messages.ErrorCode_NONE, listed.Error, listed.ErrorMessage)
	require.Equal(t, int64(1), listed.Offset)
	for i := int32(1); i < 4; i++ {
		require.Equal(t, 1, fsys.opens(f.partitionDir(i)), "t-%d opened once, on its request", i)
	}
	require.Zero(t, fsys.opens(f.partitionDir(4)), "t-4 waits its turn and had no request")
	require.Eventually(t, func() bool { return fsys.opens(f.partitionDir(5)) == 1 },
		backgroundTestTimeout, time.Millisecond, "t-5, which has a follower, opens at once")

	// A produce to the partition whose open is held waits for it.
	answer := make(chan *messages.ProduceResponse, 1)
	go func() {
		records, _ := encodeBatch("after-0")
		resp, _ := actors.Request[*messages.ProduceResponse](context.Background(), f.system.Root, partitionPID(restarted, 0),
			&messages.ProduceRequest{Topic: "t", Partition: 0, Acks: 1, Records: records}, backgroundTestTimeout)
		answer <- resp
	}()
	close(fsys.release)
	got := <-answer
	require.NotNil(t, got, "the produce to t-0 was answered")
	require.Equal(t, messages.ErrorCode_NONE, got.Error, got.ErrorMessage)
	require.Equal(t, int64(1), got.BaseOffset)

	require.Eventually(t, func() bool { return testutil.ToFloat64(metrics.dormant) == 0 },
		backgroundTestTimeout, time.Millisecond, "every partition opens in the background")
	for i := range int32(n) {
		require.Equal(t, 1, fsys.opens(f.partitionDir(i)), "t-%d opened once", i)
	}
	f.stop(t, restarted)
}

// A new topic's partitions alone in their partition start as after a
// restart: the answer comes before their logs are created, which the
// background work creates a few at a time, while a request to one not yet
// created creates it and is answered.
func TestCreatedPartitionsOpenInTheBackground(t *testing.T) {
	f := newBackgroundFixture(t, 1<<20)
	const n = 4
	fsys := newListingFS(f.mem)
	fsys.gated = f.partitionDir(0)
	metrics := NewMetrics(prometheus.NewRegistry())
	manager := f.manager(t, fsys, 1, nil, metrics)
	f.start(t, manager, n)
	select {
	case <-fsys.entered:
	case <-time.After(backgroundTestTimeout):
		t.Fatal("the background work did not create t-0")
	}
	for i := int32(1); i < n; i++ {
		require.Zero(t, fsys.opens(f.partitionDir(i)), "t-%d waits its turn behind t-0", i)
	}
	resp := f.produce(t, manager, 2, 1, "first-2")
	require.Equal(t, int64(0), resp.BaseOffset)
	require.Equal(t, 1, fsys.opens(f.partitionDir(2)), "t-2 was created on its request")

	close(fsys.release)
	require.Eventually(t, func() bool { return testutil.ToFloat64(metrics.dormant) == 0 },
		backgroundTestTimeout, time.Millisecond, "every partition is created in the background")
	for i := range int32(n) {
		require.Equal(t, 1, fsys.opens(f.partitionDir(i)), "t-%d opened once", i)
	}
	f.stop(t, manager)
}

// A partition that stops before its log opened has nothing to close: it
// sends its log dir no report, so the dir keeps the checkpoint it read.
func TestBackgroundPartitionStopsUnopened(t *testing.T) {
	f := newBackgroundFixture(t, 1<<20)
	first := f.manager(t, f.mem, 0, nil, nil)
	f.start(t, first, 2)
	f.produce(t, first, 1, -1, "kept")
	f.stop(t, first)

	fsys := newListingFS(f.mem)
	fsys.gated = f.partitionDir(0)
	restarted := f.manager(t, fsys, 1, nil, nil)
	f.start(t, restarted, 2)
	<-fsys.entered
	_, err := actors.Request[*messages.StopPartitionsResponse](context.Background(), f.system.Root, restarted,
		&messages.StopPartitionsRequest{Partitions: []*messages.TopicPartition{{Topic: "t", Partition: 1}}}, backgroundTestTimeout)
	require.NoError(t, err)
	require.Zero(t, fsys.opens(f.partitionDir(1)))
	close(fsys.release)
	f.stop(t, restarted)

	// The log dir takes the reports in the order they were sent: any of
	// t-1's came before the end marker.
	end := disk.TopicPartition{Topic: "end"}
	f.system.Root.Send(f.logDir, &disks.PartitionReport{TP: end})
	for r := range f.reports {
		if r.TP == end {
			break
		}
		if r.TP.Partition == 1 && r.PID != nil && r.PID.Id == partitionPID(restarted, 1).Id {
			t.Fatalf("a report from t-1, which never opened: %+v", r)
		}
	}
}

// After an unclean stop, a partition whose log dir checkpointed a recovery
// point validates only what lies beyond it: the segments below it are
// trusted, as Kafka trusts them; without a checkpoint, every segment is
// validated.
func TestRecoveryValidatesOnlyBeyondTheCheckpoint(t *testing.T) {
	f := newBackgroundFixture(t, 4<<10)
	first := f.manager(t, f.mem, 0, nil, nil)
	f.start(t, first, 1)
	for i := range 40 {
		f.produce(t, first, 0, -1, fmt.Sprintf("%0500d", i))
	}
	status, err := actors.Request[*messages.PartitionStatusResponse](context.Background(), f.system.Root, partitionPID(first, 0), &messages.PartitionStatusRequest{}, backgroundTestTimeout)
	require.NoError(t, err)
	checkpointed := status.RecoveryPoint
	require.Equal(t, int64(40), checkpointed, "acks=all synced every batch")
	require.Greater(t, status.Segments, int32(3))
	for i := range 10 {
		f.produce(t, first, 0, 1, fmt.Sprintf("%0500d", 40+i))
	}
	status, err = actors.Request[*messages.PartitionStatusResponse](context.Background(), f.system.Root, partitionPID(first, 0), &messages.PartitionStatusRequest{}, backgroundTestTimeout)
	require.NoError(t, err)
	f.stop(t, first)

	tp := disk.TopicPartition{Topic: "t", Partition: 0}
	for _, c := range []struct {
		name           string
		recoveryPoints map[disk.TopicPartition]int64
		most           int64 // the most bytes it may validate
	}{
		// The segment holding the recovery point is validated from the
		// index entry at or below it: at most an index interval more.
		{"beyond the checkpoint", map[disk.TopicPartition]int64{tp: checkpointed}, int64(10*600 + 4096)},
		{"no checkpoint", nil, status.SizeBytes},
	} {
		t.Run(c.name, func(t *testing.T) {
			for len(f.reports) > 0 {
				<-f.reports
			}
			restarted := f.manager(t, f.mem, 1, c.recoveryPoints, nil)
			f.start(t, restarted, 1)
			resp := f.produce(t, restarted, 0, 1, "after")
			require.Equal(t, int64(50), resp.BaseOffset)
			var recovered *disk.Recovery
			for recovered == nil {
				select {
				case r := <-f.reports:
					recovered = r.Recovered
				case <-time.After(backgroundTestTimeout):
					t.Fatal("no report of the recovery")
				}
			}
			t.Logf("validated %d bytes in %d segments of %d bytes", recovered.BytesValidated, recovered.SegmentsValidated, status.SizeBytes)
			if c.recoveryPoints == nil {
				require.Equal(t, status.SizeBytes, recovered.BytesValidated, "every segment validated")
				require.Equal(t, int(status.Segments), recovered.SegmentsValidated)
			} else {
				require.Greater(t, recovered.BytesValidated, int64(0))
				require.LessOrEqual(t, recovered.BytesValidated, c.most, "only the tail past the recovery point")
				require.LessOrEqual(t, recovered.SegmentsValidated, 3)
			}
			f.stop(t, restarted)
			// The next run recovers the same log again: the record
			// appended here is cut off by truncating to the same state.
			f.truncateLast(t, tp, 50)
		})
	}
}

// truncateLast cuts the log of tp back to end, through a log opened
// directly on the fixture's file system.
func (f *backgroundFixture) truncateLast(t *testing.T, tp disk.TopicPartition, end int64) {
	t.Helper()
	log, err := disk.Open(f.mem, f.partitionDir(tp.Partition), disk.Options{Config: f.config.Log, RecoveryPoint: end + 1})
	require.NoError(t, err)
	require.NoError(t, log.TruncateTo(end))
	require.NoError(t, log.Close())
}
