package node

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"
	"github.com/stretchr/testify/require"

	"github.com/depot-dev/depot/actors"
	"github.com/depot-dev/depot/actors/actortest"
	"github.com/depot-dev/depot/actors/client"
	"github.com/depot-dev/depot/actors/disks"
	"github.com/depot-dev/depot/actors/topic"
	"github.com/depot-dev/depot/disk"
	"github.com/depot-dev/depot/messages"
)

// A single log dir that fills: appends are refused with the retriable
// KAFKA_STORAGE_ERROR naming the dir, nothing is taken offline, every
// acknowledged record stays readable, and once there is room again appends
// resume with no restart.
func TestFullLogDirRefusesAppendsAndRecovers(t *testing.T) {
	fsys := disk.NewMemFS()
	cfg := testConfig(t, "/data")
	cfg.FS = fsys
	cfg.Logger.SetLevel(logrus.InfoLevel)
	logs := test.NewLocal(cfg.Logger)
	cfg.TickInterval = 50 * time.Millisecond
	cfg.LogDirs = []LogDir{{Path: "/data/logs"}}
	cfg.DiskReserve = disks.Reserve{Bytes: 64 << 10}
	n := startNode(t, cfg)
	created := request[*messages.CreateTopicResponse](t, n, n.Metadata(), &messages.CreateTopicRequest{Name: "t", Partitions: 1})
	require.Equal(t, messages.ErrorCode_NONE, created.Error, created.ErrorMessage)
	pid := partitionPID(t, n, "t", 0)
	produce := func(value string) *messages.ProduceResponse {
		return request[*messages.ProduceResponse](t, n, pid, &messages.ProduceRequest{Topic: "t", Acks: 1, Records: actortest.Batch(t, value)})
	}
	require.Equal(t, messages.ErrorCode_NONE, produce("before").Error)

	fsys.SetCapacity(fsys.Used() + 100<<10)
	var acked []string
	var refused *messages.ProduceResponse
	for i := 0; i < 1000 && refused == nil; i++ {
		v := string(make([]byte, 4<<10))
		if r := produce(v); r.Error != messages.ErrorCode_NONE {
			refused = r
		} else {
			acked = append(acked, v)
		}
	}
	require.NotNil(t, refused, "the dir never filled")
	require.Equal(t, messages.ErrorCode_KAFKA_STORAGE_ERROR, refused.Error)
	require.Contains(t, refused.ErrorMessage, "/data/logs is full")
	require.Eventually(t, func() bool { return describeDirs(t, n)[0].State == disks.LogDirFull }, 10*time.Second, 20*time.Millisecond)
	info := describeDirs(t, n)[0]
	require.Positive(t, info.ReserveBytes)
	metrics := scrape(t, n)
	require.Contains(t, metrics, `depot_log_dir_full{dir="/data/logs",state="full"} 1`)
	require.Contains(t, metrics, fmt.Sprintf(`depot_log_dir_reserve_bytes{dir="/data/logs",state="full"} %d`, 64<<10))
	require.Regexp(t, `depot_log_dir_free_bytes\{dir="/data/logs",state="full"\} \d`, metrics)
	require.Equal(t, logrus.WarnLevel, dirLogLine(t, logs, "/data/logs", "log directory full").Level)
	require.Equal(t, messages.ErrorCode_KAFKA_STORAGE_ERROR, produce("still full").Error)
	// Reads go on, with every acknowledged record.
	require.Len(t, fetchValues(t, n, pid, "t", 0), 1+len(acked))

	// Room again, by a larger file system: appends resume by themselves.
	fsys.SetCapacity(-1)
	require.Eventually(t, func() bool { return describeDirs(t, n)[0].State == disks.LogDirOnline }, 10*time.Second, 20*time.Millisecond)
	require.Equal(t, messages.ErrorCode_NONE, produce("after").Error)
	require.Equal(t, logrus.InfoLevel, dirLogLine(t, logs, "/data/logs", "log directory has room again").Level)
	require.Contains(t, scrape(t, n), `depot_log_dir_full{dir="/data/logs",state="online"} 0`)
	values := fetchValues(t, n, pid, "t", 0)
	require.Len(t, values, 2+len(acked))
	require.Equal(t, "0:before", values[0])
	require.Contains(t, values[len(values)-1], ":after")
}

// A burst into a small dir beside a big one: as the small dir fills, its
// partition is moved out at once, unthrottled, and writes go on in the big
// dir; no partition goes offline and every acknowledged record is read.
func TestBurstIntoASmallDirMovesOut(t *testing.T) {
	s := startSmallBesideBig(t, "burst", 8<<20, 1<<30, 1<<20)
	n, c := s.n, s.c
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	p, err := c.NewProducer(client.Acks(1), client.DeliveryTimeout(time.Minute))
	require.NoError(t, err)
	const records = 12 << 10 // 12 MiB of 1 KiB values: more than the small dir holds
	var d deliveries
	value := make([]byte, 1<<10)
	for i := range records {
		p.Produce(ctx, &client.Record{Topic: "burst", Value: fmt.Appendf(value[:0:0], "%08d%s", i, value[8:])}, d.promise)
	}
	require.NoError(t, p.Flush(ctx))
	require.NoError(t, p.Close())
	acked, failures := d.counts()
	require.Empty(t, failures)
	require.Equal(t, records, acked)

	dirs := describeDirs(t, n)
	for _, d := range dirs {
		require.NotEqual(t, disks.LogDirOffline, d.State, d.Path)
	}
	got := consumeAll(t, c, "burst", 1)
	require.Len(t, got[0], records, "every acknowledged record is read")
	// The small dir's reports catch up with the burst, and its partition
	// moves out; writes go on there.
	waitMovedTo(t, n, "burst", s.big)
	p, err = c.NewProducer(client.Acks(1))
	require.NoError(t, err)
	require.NoError(t, p.ProduceSync(ctx, &client.Record{Topic: "burst", Value: []byte("after the move")}))
	require.NoError(t, p.Close())
	require.Len(t, consumeAll(t, c, "burst", 1)[0], records+1)
}

// scrape returns the node's /metrics page.
func scrape(t *testing.T, n *Node) string {
	t.Helper()
	res, err := http.Get("http://" + n.HTTPAddress() + "/metrics")
	require.NoError(t, err)
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, res.StatusCode)
	return string(body)
}

// dirLogLine waits for a line logged about log dir dir whose message
// starts with prefix, and returns the first.
func dirLogLine(t *testing.T, logs *test.Hook, dir, prefix string) *logrus.Entry {
	t.Helper()
	var line *logrus.Entry
	require.Eventually(t, func() bool {
		for _, e := range logs.AllEntries() {
			if e.Data["dir"] == dir && strings.HasPrefix(e.Message, prefix) {
				line = e
				return true
			}
		}
		return false
	}, 10*time.Second, 10*time.Millisecond, "no line %q about %s logged", prefix, dir)
	return line
}

// A declared capacity is a quota, exact though the file system is larger:
// a burst of appends to several partitions at once, far faster than they
// report, leaves the dir's partitions holding no more than the capacity
// less the reserve, and every byte acknowledged. The refusals are the
// retriable KAFKA_STORAGE_ERROR naming the dir and its free bytes; the
// dir is full, and leaves full once records are deleted.
func TestDeclaredCapacityIsAnExactQuota(t *testing.T) {
	const (
		capacity   = 4 << 20
		reserve    = 512 << 10
		limit      = capacity - reserve
		partitions = 4
		perPart    = 40
	)
	dir := filepath.Join(t.TempDir(), "quota")
	cfg := diskTestConfig(t, disks.PolicyCount, LogDir{Path: dir, Capacity: capacity})
	cfg.DiskReserve = disks.Reserve{Bytes: reserve}
	n := startNode(t, cfg)
	created := request[*messages.CreateTopicResponse](t, n, n.Metadata(), &messages.CreateTopicRequest{
		Name: "q", Partitions: partitions, Configs: map[string]string{topic.ConfigSegmentBytes: fmt.Sprint(256 << 10)}})
	require.Equal(t, messages.ErrorCode_NONE, created.Error, created.ErrorMessage)

	batch := actortest.Batch(t, string(make([]byte, 64<<10)))
	pids := make([]*actor.PID, partitions)
	pending := make([]int, partitions)
	for p := range pids {
		pids[p], pending[p] = partitionPID(t, n, "q", int32(p)), perPart
	}
	// Rounds of every partition's batches at once, the refused ones sent
	// again, as a producer retries, until a round is refused whole.
	var acked int64
	var refusal string
	for round := 0; ; round++ {
		require.Less(t, round, 100, "the dir never filled")
		var futures []*actor.Future
		var of []int
		for p, pid := range pids {
			for range pending[p] {
				// A batch of its own: the partition stamps its offsets in.
				records := bytes.Clone(batch)
				futures = append(futures, n.System().Root.RequestFuture(pid, &messages.ProduceRequest{Topic: "q", Partition: int32(p), Acks: 1, Records: records}, requestTimeout))
				of = append(of, p)
			}
		}
		progress := false
		for i, f := range futures {
			res, err := f.Result()
			require.NoError(t, err)
			resp := res.(*messages.ProduceResponse)
			switch resp.Error {
			case messages.ErrorCode_NONE:
				acked += int64(len(batch))
				pending[of[i]]--
				progress = true
			case messages.ErrorCode_KAFKA_STORAGE_ERROR:
				refusal = resp.ErrorMessage
			default:
				t.Fatalf("produce: %v %s", resp.Error, resp.ErrorMessage)
			}
		}
		if len(futures) == 0 || !progress && describeDirs(t, n)[0].State == disks.LogDirFull {
			break
		}
	}
	require.Contains(t, refusal, "log dir "+dir)
	require.Contains(t, refusal, "bytes free")

	held := func() int64 {
		var sum int64
		for p := range int32(partitions) {
			sum += request[*messages.PartitionStatusResponse](t, n, partitionPID(t, n, "q", p), &messages.PartitionStatusRequest{}).SizeBytes
		}
		return sum
	}
	require.Equal(t, acked, held(), "every acknowledged byte, and nothing else")
	require.LessOrEqual(t, acked, int64(limit))
	require.Greater(t, acked, int64(limit-partitions*len(batch)), "refused only near the quota")

	// Deleting records makes room, and the dir takes appends again.
	for p := range int32(partitions) {
		r := request[*messages.DeleteRecordsResponse](t, n, partitionPID(t, n, "q", p), &messages.DeleteRecordsRequest{Topic: "q", Partition: p, Offset: -1})
		require.Equal(t, messages.ErrorCode_NONE, r.Error, r.ErrorMessage)
	}
	require.Eventually(t, func() bool { return describeDirs(t, n)[0].State == disks.LogDirOnline }, 10*time.Second, 20*time.Millisecond)
	resp := request[*messages.ProduceResponse](t, n, partitionPID(t, n, "q", 0), &messages.ProduceRequest{Topic: "q", Acks: 1, Records: batch})
	require.Equal(t, messages.ErrorCode_NONE, resp.Error, resp.ErrorMessage)
	require.LessOrEqual(t, held(), int64(limit))
}

// Every log dir full: produce to any partition is refused with an error
// naming every dir and its free bytes, as is a new topic; reads go on, and
// the node stays healthy.
func TestEveryDirFull(t *testing.T) {
	fsys := disk.NewMemFS()
	cfg := testConfig(t, "/data")
	cfg.FS = fsys
	cfg.TickInterval = 50 * time.Millisecond
	cfg.Policy = disks.PolicyCount
	cfg.LogDirs = []LogDir{{Path: "/data/a"}, {Path: "/data/b"}}
	cfg.DiskReserve = disks.Reserve{Bytes: 64 << 10}
	n := startNode(t, cfg)
	created := request[*messages.CreateTopicResponse](t, n, n.Metadata(), &messages.CreateTopicRequest{Name: "t", Partitions: 2})
	require.Equal(t, messages.ErrorCode_NONE, created.Error, created.ErrorMessage)
	pids := []*actor.PID{partitionPID(t, n, "t", 0), partitionPID(t, n, "t", 1)}
	produce := func(p int, value string) *messages.ProduceResponse {
		return request[*messages.ProduceResponse](t, n, pids[p], &messages.ProduceRequest{Topic: "t", Partition: int32(p), Acks: 1, Records: actortest.Batch(t, value)})
	}

	// The two dirs share one file system, which fills: both go full at
	// once, and neither can take the other's partition.
	fsys.SetCapacity(fsys.Used() + 400<<10)
	acked := []int{0, 0}
	for p := range pids {
		for i := 0; ; i++ {
			require.Less(t, i, 1000, "partition %d never refused", p)
			if produce(p, string(make([]byte, 4<<10))).Error != messages.ErrorCode_NONE {
				break
			}
			acked[p]++
		}
	}
	require.Eventually(t, func() bool {
		for _, d := range describeDirs(t, n) {
			if d.State != disks.LogDirFull {
				return false
			}
		}
		return true
	}, 10*time.Second, 20*time.Millisecond)
	for p := range pids {
		require.Eventually(t, func() bool {
			r := produce(p, "refused")
			return r.Error == messages.ErrorCode_KAFKA_STORAGE_ERROR &&
				strings.Contains(r.ErrorMessage, "every log dir of this node is full") &&
				strings.Contains(r.ErrorMessage, "/data/a has ") && strings.Contains(r.ErrorMessage, "/data/b has ")
		}, 10*time.Second, 20*time.Millisecond, "partition %d", p)
		require.Len(t, fetchValues(t, n, pids[p], "t", 0), acked[p], "reads go on")
	}
	refused := request[*messages.CreateTopicResponse](t, n, n.Metadata(), &messages.CreateTopicRequest{Name: "u", Partitions: 1})
	require.NotEqual(t, messages.ErrorCode_NONE, refused.Error)
	require.Contains(t, refused.ErrorMessage, "every log dir of this node is full")
	res, err := http.Get("http://" + n.HTTPAddress() + "/healthz")
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)
	for _, d := range describeDirs(t, n) {
		require.NotEqual(t, disks.LogDirOffline, d.State)
	}

	// Room again: produce goes on, and the refusals no longer say every
	// dir is full.
	fsys.SetCapacity(-1)
	require.Eventually(t, func() bool { return produce(0, "after").Error == messages.ErrorCode_NONE }, 10*time.Second, 20*time.Millisecond)
	require.Equal(t, messages.ErrorCode_NONE, produce(1, "after").Error)
}

// produceUntilRefused produces batches of value to a partition until one is
// refused, which must be with KAFKA_STORAGE_ERROR, and returns how many
// were acknowledged.
func produceUntilRefused(t *testing.T, n *Node, topic string, partition int32, value string) int {
	t.Helper()
	pid := partitionPID(t, n, topic, partition)
	for acked := 0; ; acked++ {
		require.Less(t, acked, 10000, "%s-%d never refused", topic, partition)
		r := request[*messages.ProduceResponse](t, n, pid, &messages.ProduceRequest{Topic: topic, Partition: partition, Acks: 1, Records: actortest.Batch(t, value)})
		if r.Error != messages.ErrorCode_NONE {
			require.Equal(t, messages.ErrorCode_KAFKA_STORAGE_ERROR, r.Error, r.ErrorMessage)
			return acked
		}
	}
}

// A full dir restarted comes back full while it is still short of room
// (under twice its reserve free: whether it was full is not known after a
// restart, and hysteresis would have kept it full), and online when it has
// room; every acknowledged record is read either way. Both for a declared
// capacity and for a file system that filled.
func TestRestartOfAFullDir(t *testing.T) {
	for _, tc := range []struct {
		name string
		// config is the node's config; roomy, the same with room for the
		// dir.
		config func(t *testing.T) (full, roomy Config)
	}{
		{name: "declared capacity", config: func(t *testing.T) (Config, Config) {
			cfg := diskTestConfig(t, disks.PolicyCount, LogDir{Path: filepath.Join(t.TempDir(), "d"), Capacity: 2 << 20})
			cfg.DiskReserve = disks.Reserve{Bytes: 256 << 10}
			roomy := cfg
			roomy.LogDirs = []LogDir{{Path: cfg.LogDirs[0].Path, Capacity: 16 << 20}}
			return cfg, roomy
		}},
		{name: "file system", config: func(t *testing.T) (Config, Config) {
			fsys := disk.NewMemFS()
			cfg := testConfig(t, "/data")
			cfg.FS = fsys
			cfg.TickInterval = 50 * time.Millisecond
			cfg.LogDirs = []LogDir{{Path: "/data/d"}}
			cfg.DiskReserve = disks.Reserve{Bytes: 64 << 10}
			start := startNode(t, cfg) // to know what the node itself uses
			require.NoError(t, start.Stop())
			fsys.SetCapacity(fsys.Used() + 1<<20)
			roomy := cfg
			roomy.FS = &growFS{MemFS: fsys}
			return cfg, roomy
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, roomy := tc.config(t)
			n := startNode(t, cfg)
			created := request[*messages.CreateTopicResponse](t, n, n.Metadata(), &messages.CreateTopicRequest{Name: "t", Partitions: 1})
			require.Equal(t, messages.ErrorCode_NONE, created.Error, created.ErrorMessage)
			acked := produceUntilRefused(t, n, "t", 0, string(make([]byte, 16<<10)))
			require.Positive(t, acked)
			require.Eventually(t, func() bool { return describeDirs(t, n)[0].State == disks.LogDirFull }, 10*time.Second, 20*time.Millisecond)
			require.NoError(t, n.Stop())

			n = startNode(t, cfg)
			require.Eventually(t, func() bool { return describeDirs(t, n)[0].State == disks.LogDirFull }, 10*time.Second, 20*time.Millisecond, "back full")
			r := request[*messages.ProduceResponse](t, n, partitionPID(t, n, "t", 0), &messages.ProduceRequest{Topic: "t", Acks: 1, Records: actortest.Batch(t, "refused")})
			require.Equal(t, messages.ErrorCode_KAFKA_STORAGE_ERROR, r.Error, r.ErrorMessage)
			require.Len(t, fetchAll(t, n, partitionPID(t, n, "t", 0), "t"), acked)
			require.NoError(t, n.Stop())

			n = startNode(t, roomy)
			pid := partitionPID(t, n, "t", 0)
			require.Len(t, fetchAll(t, n, partitionPID(t, n, "t", 0), "t"), acked)
			require.Equal(t, disks.LogDirOnline, describeDirs(t, n)[0].State, "back online")
			r = request[*messages.ProduceResponse](t, n, pid, &messages.ProduceRequest{Topic: "t", Acks: 1, Records: actortest.Batch(t, "taken")})
			require.Equal(t, messages.ErrorCode_NONE, r.Error, r.ErrorMessage)
		})
	}
}

// growFS is a MemFS whose capacity is lifted when a node first opens it:
// the file system grew while the node was down.
type growFS struct {
	*disk.MemFS
	once sync.Once
}

func (g *growFS) MkdirAll(name string, perm os.FileMode) error {
	g.once.Do(func() { g.SetCapacity(-1) })
	return g.MemFS.MkdirAll(name, perm)
}

// A node restarted with a dir declared smaller than what it holds (an
// upgrade that declares capacities) starts with that dir full, refusing
// appends, and moves its partitions out to a dir with room; then the dir
// takes appends again and every record is read.
func TestRestartOverDeclaredCapacity(t *testing.T) {
	s := startSmallBesideBig(t, "t", 64<<20, 64<<20, 256<<10)
	fill(t, s.c, "t", 1, 3<<20)
	s.c.Close()
	require.NoError(t, s.n.Stop())

	cfg := s.cfg
	cfg.LogDirs[0].Capacity = 2 << 20 // less than the 3 MiB it holds
	n := startNode(t, cfg)
	require.Equal(t, logrus.WarnLevel, dirLogLine(t, s.logs, s.small, "log directory full").Level, "the small dir starts full")
	waitMovedTo(t, n, "t", s.big)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.Eventually(t, func() bool { return describeDirs(t, n)[0].State == disks.LogDirOnline }, 10*time.Second, 20*time.Millisecond)
	c := newClient(t, n.Address())
	p, err := c.NewProducer(client.Acks(1))
	require.NoError(t, err)
	require.NoError(t, p.ProduceSync(ctx, &client.Record{Topic: "t", Value: []byte("after")}))
	require.NoError(t, p.Close())
	require.Len(t, consumeAll(t, c, "t", 1)[0], 3<<10+1)
}

// TestUrgentMoveTiming measures how long a burst into a small dir beside a
// big one takes to be relieved: from the moment the partition's log
// crosses the small dir's capacity less twice its reserve (where relief
// begins) to the end of the urgent move (the partition serving from the
// big dir), with the byte rate of the burst, once unpaced and once paced
// at 32 MiB/s. The partition is filled first to just under that mark with
// a capacity declared far larger, and the node restarted with the small
// capacity, so that the burst starts near the mark with no write rate
// known: otherwise the projected fill time, at any burst's rate, relieves
// the dir long before it crosses. It logs the figures, and asserts only
// what must hold: no dir offline, and every acknowledged record read once.
// Run with:
//
//	go test -run TestUrgentMoveTiming -v ./node/
func TestUrgentMoveTiming(t *testing.T) {
	if testing.Short() {
		t.Skip("a measurement: seconds of bursts")
	}
	const (
		capacity = 256 << 20
		reserve  = 16 << 20
		cross    = capacity - 2*reserve
		before   = cross - 4<<20 // filled before the burst
	)
	for _, pace := range []int64{0, 32 << 20} {
		name := "unpaced"
		if pace > 0 {
			name = fmt.Sprintf("%d MiB/s", pace>>20)
		}
		t.Run(name, func(t *testing.T) {
			s := startSmallBesideBig(t, "burst", 1<<40, 4<<30, reserve)
			small, big, logs := s.small, s.big, s.logs
			fill(t, s.c, "burst", 1, before*1000/1040) // 1 KiB values and their record and batch overhead
			s.c.Close()
			require.NoError(t, s.n.Stop())
			cfg := s.cfg
			cfg.LogDirs[0].Capacity = capacity
			n := startNode(t, cfg)
			c := newClient(t, n.Address())
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			pid := partitionPID(t, n, "burst", 0)
			st := request[*messages.PartitionStatusResponse](t, n, pid, &messages.PartitionStatusRequest{})
			require.Less(t, st.SizeBytes, int64(cross), "filled past the mark")
			require.Equal(t, small, st.LogDir)
			start := st.LogEndOffset

			// The watcher polls the partition's size and dir.
			var crossedAt, movedAt time.Time
			var movedBytes int64
			watched := make(chan struct{})
			go func() {
				defer close(watched)
				for ctx.Err() == nil {
					st, err := actors.Request[*messages.PartitionStatusResponse](ctx, n.System().Root, pid, &messages.PartitionStatusRequest{}, requestTimeout)
					if err != nil {
						return
					}
					now := time.Now()
					if crossedAt.IsZero() && st.SizeBytes >= cross {
						crossedAt = now
					}
					if st.LogDir == big {
						movedAt, movedBytes = now, st.SizeBytes
						return
					}
					time.Sleep(time.Millisecond)
				}
			}()

			p, err := c.NewProducer(client.Acks(1), client.DeliveryTimeout(2*time.Minute))
			require.NoError(t, err)
			var d deliveries
			value := make([]byte, 1<<10)
			started := time.Now()
			var sent int64
		produce:
			for i := 0; ; i++ {
				select {
				case <-watched:
					break produce
				default:
				}
				if pace > 0 {
					time.Sleep(time.Until(started.Add(time.Duration(float64(sent) / float64(pace) * float64(time.Second)))))
				}
				p.Produce(ctx, &client.Record{Topic: "burst", Value: value}, d.promise)
				sent += int64(len(value))
			}
			require.NoError(t, p.Flush(ctx))
			burst := time.Since(started)
			require.NoError(t, p.Close())
			acked, failures := d.counts()
			require.Empty(t, failures)
			require.False(t, movedAt.IsZero(), "the partition never moved")
			for _, dir := range describeDirs(t, n) {
				require.NotEqual(t, disks.LogDirOffline, dir.State, dir.Path)
			}
			require.Len(t, consumeAll(t, c, "burst", 1)[0], int(start)+acked, "every acknowledged record, once")
			relief := dirLogLine(t, logs, small, "log directory filling").Time
			since := func(at time.Time) time.Duration { return at.Sub(started).Round(time.Millisecond) }
			setting := fmt.Sprintf("%d MiB acknowledged in %v, refusals and retries included, into %d of %d MiB, reserve %d MiB",
				int64(acked)>>10, burst.Round(time.Millisecond), before>>20, capacity>>20, reserve>>20)
			if crossedAt.IsZero() {
				// The projected fill time had the dir relieved first.
				t.Logf("burst %s: urgent move of %d MiB done before crossing %d MiB (into the burst: relief planned at %v, moved at %v)",
					setting, movedBytes>>20, cross>>20, since(relief), since(movedAt))
				return
			}
			t.Logf("burst at %.0f MiB/s to the crossing, %s: urgent move of %d MiB done %v after crossing %d MiB "+
				"(into the burst: crossed at %v, relief planned at %v, moved at %v)",
				float64(cross-st.SizeBytes)/(1<<20)/crossedAt.Sub(started).Seconds(), setting,
				movedBytes>>20, movedAt.Sub(crossedAt).Round(time.Millisecond), cross>>20, since(crossedAt), since(relief), since(movedAt))
		})
	}
}

// smallBesideBig is a node with a small log dir and a big one, placing by
// count, and a topic of one partition in the small dir.
type smallBesideBig struct {
	cfg        Config
	logs       *test.Hook
	n          *Node
	c          *client.Client
	small, big string
}

// startSmallBesideBig starts a smallBesideBig whose dirs declare the
// capacities given and keep reserve bytes, and creates topic.
func startSmallBesideBig(t *testing.T, topic string, smallCapacity, bigCapacity, reserve int64) *smallBesideBig {
	t.Helper()
	root := t.TempDir()
	s := &smallBesideBig{small: filepath.Join(root, "small"), big: filepath.Join(root, "big")}
	s.cfg = diskTestConfig(t, disks.PolicyCount, LogDir{Path: s.small, Capacity: smallCapacity}, LogDir{Path: s.big, Capacity: bigCapacity})
	s.cfg.DiskReserve = disks.Reserve{Bytes: reserve}
	s.logs = test.NewLocal(s.cfg.Logger)
	s.n = startNode(t, s.cfg)
	s.c = newClient(t, s.n.Address())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	md, err := s.c.CreateTopic(ctx, topic, 1, nil)
	require.NoError(t, err)
	require.Equal(t, s.small, md.Partitions[0].LogDir)
	return s
}

// waitMovedTo waits until partition 0 of topic serves from dir.
func waitMovedTo(t *testing.T, n *Node, topic, dir string) {
	t.Helper()
	require.Eventually(t, func() bool {
		status := request[*messages.PartitionStatusResponse](t, n, partitionPID(t, n, topic, 0), &messages.PartitionStatusRequest{})
		return status.LogDir == dir
	}, 30*time.Second, 20*time.Millisecond, "%s-0 never moved to %s", topic, dir)
}

// deliveries counts the records a producer acknowledged and keeps its
// failures; promise is safe to call from the producer's goroutines.
type deliveries struct {
	mu       sync.Mutex
	acked    int
	failures []error
}

func (d *deliveries) promise(_ *client.Record, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err != nil {
		d.failures = append(d.failures, err)
		return
	}
	d.acked++
}

func (d *deliveries) counts() (acked int, failures []error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.acked, d.failures
}
