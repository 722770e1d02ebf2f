package node

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/depot-dev/depot/actors/actortest"
	"github.com/depot-dev/depot/actors/client"
	"github.com/depot-dev/depot/actors/disks"
	"github.com/depot-dev/depot/disk"
	"github.com/depot-dev/depot/messages"
)

const mib = 1 << 20

// diskTestConfig is a node whose balancer acts quickly on small data.
func diskTestConfig(t *testing.T, policy string, dirs ...LogDir) Config {
	t.Helper()
	cfg := testConfig(t, t.TempDir())
	cfg.LogDirs = dirs
	cfg.Policy = policy
	cfg.TickInterval = 50 * time.Millisecond
	cfg.Balance = disks.BalanceSettings{Interval: -1, MaxDeviation: 0.10, HighWater: 0.80, ThrottleBytesPerS: -1, MinMoveBytes: mib}
	return cfg
}

func describeDirs(t *testing.T, n *Node) []*messages.LogDirInfo {
	t.Helper()
	resp := request[*messages.DescribeLogDirsResponse](t, n, n.Placement(), &messages.DescribeLogDirsRequest{})
	return resp.Dirs
}

// fill writes perPartition bytes of 1 KiB records to every partition of topic.
func fill(t testing.TB, c *client.Client, topic string, partitions int32, perPartition int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := c.NewProducer(client.Acks(1), client.WithPartitioner(client.ManualPartitioner()))
	require.NoError(t, err)
	defer p.Close()
	value := make([]byte, 1024)
	for part := int32(0); part < partitions; part++ {
		for i := 0; i < perPartition/len(value); i++ {
			p.Produce(ctx, &client.Record{Topic: topic, Partition: part, Value: value}, nil)
		}
	}
	require.NoError(t, p.Flush(ctx))
}

// waitReported waits until the log dirs report at least total bytes.
func waitReported(t *testing.T, n *Node, total int64) []*messages.LogDirInfo {
	t.Helper()
	var dirs []*messages.LogDirInfo
	require.Eventually(t, func() bool {
		dirs = describeDirs(t, n)
		var sum int64
		for _, d := range dirs {
			sum += d.Bytes
		}
		return sum >= total
	}, 30*time.Second, 20*time.Millisecond)
	return dirs
}

func table(dirs []*messages.LogDirInfo) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-12s %10s %8s %8s\n", "dir", "partitions", "MiB", "used%")
	for _, d := range dirs {
		fmt.Fprintf(&b, "%-12s %10d %8.1f %8.1f\n", filepath.Base(d.Path), d.Partitions, float64(d.Bytes)/mib, 100*float64(d.Bytes)/float64(d.CapacityBytes))
	}
	return b.String()
}

// maxDeviation is the largest relative distance of a directory's used
// fraction from the mean fraction.
func maxDeviation(dirs []*messages.LogDirInfo) float64 {
	var mean float64
	for _, d := range dirs {
		mean += float64(d.Bytes) / float64(d.CapacityBytes)
	}
	mean /= float64(len(dirs))
	worst := 0.0
	for _, d := range dirs {
		worst = math.Max(worst, math.Abs(float64(d.Bytes)/float64(d.CapacityBytes)-mean)/mean)
	}
	return worst
}

// runScenario is Kafka's known failure: one disk holding __consumer_offsets
// and a topic with data, two disks added, a new topic of 12 partitions
// written. It returns the directories after the writes, and after balancing
// when balance is set.
func runScenario(t *testing.T, policy string, balance bool) (written, balanced []*messages.LogDirInfo, moved int64, took time.Duration) {
	t.Helper()
	root := t.TempDir()
	cfg := diskTestConfig(t, policy, LogDir{Path: filepath.Join(root, "old"), Capacity: 1 << 30})
	n := startNode(t, cfg)
	c := newClient(t, n.Address())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, err := c.CreateTopic(ctx, "__consumer_offsets", 50, nil)
	require.NoError(t, err)
	_, err = c.CreateTopic(ctx, "events", 6, nil)
	require.NoError(t, err)
	fill(t, c, "events", 6, 4*mib)
	waitReported(t, n, 24*mib)
	for _, name := range []string{"new1", "new2"} {
		require.NoError(t, os.Mkdir(filepath.Join(root, name), 0o755))
		require.NoError(t, c.AddLogDir(ctx, "", filepath.Join(root, name), 1<<30, false))
	}
	_, err = c.CreateTopic(ctx, "orders", 12, nil)
	require.NoError(t, err)
	fill(t, c, "orders", 12, 2*mib)
	written = waitReported(t, n, 48*mib)
	// What a metrics scrape asks: the same directories, without their
	// partitions.
	totals := request[*messages.DescribeLogDirsResponse](t, n, n.Placement(), &messages.DescribeLogDirsRequest{TotalsOnly: true}).Dirs
	require.Len(t, totals, len(written))
	for i, d := range totals {
		require.Equal(t, written[i].Path, d.Path)
		require.Equal(t, written[i].Partitions, d.Partitions)
		require.Len(t, written[i].PartitionUsage, int(written[i].Partitions))
		require.Empty(t, d.PartitionUsage)
	}
	if !balance {
		return written, nil, 0, 0
	}
	started := time.Now()
	plan, err := c.Balance(ctx, "", false)
	require.NoError(t, err)
	for _, m := range plan.Moves {
		moved += m.Bytes
	}
	require.Eventually(t, func() bool {
		dirs := describeDirs(t, n)
		var total int64
		for _, d := range dirs {
			total += d.Bytes
		}
		if total < 48*mib || maxDeviation(dirs) > 0.10 {
			return false
		}
		balanced = dirs
		return true
	}, time.Minute, 50*time.Millisecond)
	return written, balanced, moved, time.Since(started)
}

func TestScenarioCountPolicySkews(t *testing.T) {
	written, _, _, _ := runScenario(t, disks.PolicyCount, false)
	t.Logf("count policy after writes:\n%s", table(written))
	// Kafka's rule put every partition of the new topic on the new disks:
	// the old disk still holds twice the bytes of each new one.
	require.Equal(t, int32(56), written[0].Partitions)
	require.Greater(t, maxDeviation(written), 0.3)
}

func TestScenarioLoadPolicyBalances(t *testing.T) {
	written, balanced, moved, took := runScenario(t, disks.PolicyLoad, true)
	t.Logf("load policy after writes:\n%s", table(written))
	t.Logf("after balancing (%v, %.1f MiB moved):\n%s", took.Round(time.Millisecond), float64(moved)/mib, table(balanced))
	require.LessOrEqual(t, maxDeviation(balanced), 0.10)
}

func TestUnequalCapacitiesFillToEqualFractions(t *testing.T) {
	root := t.TempDir()
	cfg := diskTestConfig(t, disks.PolicyLoad,
		LogDir{Path: filepath.Join(root, "small"), Capacity: 100 * mib},
		LogDir{Path: filepath.Join(root, "medium"), Capacity: 200 * mib},
		LogDir{Path: filepath.Join(root, "large"), Capacity: 400 * mib})
	cfg.Balance.Interval = 100 * time.Millisecond
	n := startNode(t, cfg)
	c := newClient(t, n.Address())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := c.CreateTopic(ctx, "metrics", 28, nil)
	require.NoError(t, err)
	fill(t, c, "metrics", 28, 2*mib)
	var dirs []*messages.LogDirInfo
	require.Eventually(t, func() bool {
		dirs = describeDirs(t, n)
		var total int64
		for _, d := range dirs {
			total += d.Bytes
		}
		return total >= 56*mib && maxDeviation(dirs) <= 0.10
	}, time.Minute, 50*time.Millisecond)
	t.Logf("unequal capacities after balancing:\n%s", table(dirs))
	// Equal fractions means unequal bytes: the large dir holds the most.
	require.Greater(t, dirs[2].Bytes, dirs[1].Bytes)
	require.Greater(t, dirs[1].Bytes, dirs[0].Bytes)
}

// failingFS fails every mutating operation under prefix once armed, as a
// disk that died would.
type failingFS struct {
	disk.FS
	prefix string
	armed  atomic.Bool
}

func (f *failingFS) fails(name string) bool {
	return f.armed.Load() && strings.HasPrefix(name, f.prefix)
}

func (f *failingFS) OpenFile(name string, flag int, perm os.FileMode) (disk.File, error) {
	file, err := f.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &failingFile{File: file, fs: f}, nil
}

type failingFile struct {
	disk.File
	fs *failingFS
}

func (f *failingFile) Write(p []byte) (int, error) {
	if f.fs.fails(f.Name()) {
		return 0, fmt.Errorf("write %s: %w", f.Name(), disk.ErrInjected)
	}
	return f.File.Write(p)
}

func (f *failingFile) Sync() error {
	if f.fs.fails(f.Name()) {
		return fmt.Errorf("sync %s: %w", f.Name(), disk.ErrInjected)
	}
	return f.File.Sync()
}

func TestFailedLogDirGoesOfflineAndNodeKeepsServing(t *testing.T) {
	root := t.TempDir()
	bad, good := filepath.Join(root, "bad"), filepath.Join(root, "good")
	fsys := &failingFS{FS: disk.OS, prefix: bad}
	cfg := diskTestConfig(t, disks.PolicyCount, LogDir{Path: bad, Capacity: 1 << 30}, LogDir{Path: good, Capacity: 1 << 30})
	cfg.FS = fsys
	n := startNode(t, cfg)
	created := request[*messages.CreateTopicResponse](t, n, n.Metadata(), &messages.CreateTopicRequest{Name: "t", Partitions: 2})
	require.Equal(t, messages.ErrorCode_NONE, created.Error, created.ErrorMessage)
	var inBad, inGood int32 = -1, -1
	for _, p := range created.Topic.Partitions {
		if p.LogDir == bad {
			inBad = p.Partition
		} else {
			inGood = p.Partition
		}
	}
	require.True(t, inBad >= 0 && inGood >= 0, "one partition in each dir: %v", created.Topic.Partitions)

	fsys.armed.Store(true)
	resp := request[*messages.ProduceResponse](t, n, partitionPID(t, n, "t", inBad), &messages.ProduceRequest{Topic: "t", Partition: inBad, Acks: -1, Records: actortest.Batch(t, "x")})
	require.Equal(t, messages.ErrorCode_KAFKA_STORAGE_ERROR, resp.Error)

	// The directory is offline with its reason; the other keeps serving.
	require.Eventually(t, func() bool {
		dirs := describeDirs(t, n)
		return dirs[0].State == disks.LogDirOffline && strings.Contains(dirs[0].Error, "injected")
	}, 10*time.Second, 20*time.Millisecond)
	resp = request[*messages.ProduceResponse](t, n, partitionPID(t, n, "t", inGood), &messages.ProduceRequest{Topic: "t", Partition: inGood, Acks: -1, Records: actortest.Batch(t, "y")})
	require.Equal(t, messages.ErrorCode_NONE, resp.Error, resp.ErrorMessage)
	st := request[*messages.PartitionStatusResponse](t, n, partitionPID(t, n, "t", inBad), &messages.PartitionStatusRequest{})
	require.Equal(t, messages.ErrorCode_KAFKA_STORAGE_ERROR, st.Error)

	// New partitions skip the failed directory.
	created = request[*messages.CreateTopicResponse](t, n, n.Metadata(), &messages.CreateTopicRequest{Name: "later", Partitions: 3})
	require.Equal(t, messages.ErrorCode_NONE, created.Error, created.ErrorMessage)
	for _, p := range created.Topic.Partitions {
		require.Equal(t, good, p.LogDir)
	}
}

func TestHotAddDrainAndRestart(t *testing.T) {
	root := t.TempDir()
	first, second := filepath.Join(root, "first"), filepath.Join(root, "second")
	cfg := diskTestConfig(t, disks.PolicyLoad, LogDir{Path: first, Capacity: 1 << 30})
	n := startNode(t, cfg)
	c := newClient(t, n.Address())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := c.CreateTopic(ctx, "logs", 4, nil)
	require.NoError(t, err)
	fill(t, c, "logs", 4, mib)
	waitReported(t, n, 4*mib)

	// Hot add: the new directory serves at once and survives a restart.
	require.NoError(t, os.Mkdir(second, 0o755))
	require.NoError(t, c.AddLogDir(ctx, "", second, 1<<30, false))
	require.Error(t, c.AddLogDir(ctx, "", second, 1<<30, false), "adding twice is refused")
	// Drain the first: everything moves to the second.
	moves, err := c.DrainLogDir(ctx, "", first)
	require.NoError(t, err)
	require.Len(t, moves, 4)
	require.Eventually(t, func() bool {
		dirs := describeDirs(t, n)
		return dirs[0].Partitions == 0 && dirs[0].State == disks.LogDirDraining && dirs[1].Partitions == 4
	}, 30*time.Second, 20*time.Millisecond)
	// The metadata follows the moves.
	require.Eventually(t, func() bool {
		md := request[*messages.MetadataResponse](t, n, n.Metadata(), &messages.MetadataRequest{Topics: []string{"logs"}})
		for _, p := range md.Topics[0].Partitions {
			if p.LogDir != second {
				return false
			}
		}
		return true
	}, 10*time.Second, 20*time.Millisecond)
	_, err = c.CreateTopic(ctx, "after-drain", 2, nil)
	require.NoError(t, err)
	for p := int32(0); p < 2; p++ {
		st, err := c.PartitionStatus(ctx, "after-drain", p)
		require.NoError(t, err)
		require.Equal(t, second, st.LogDir, "nothing new is placed on a draining dir")
	}
	require.NoError(t, n.Stop())

	// After a restart with only the first dir configured, the added dir and
	// the draining state are back, and every record is where it was.
	n = startNode(t, cfg)
	c = newClient(t, n.Address())
	dirs := describeDirs(t, n)
	require.Len(t, dirs, 2)
	require.Equal(t, disks.LogDirDraining, dirs[0].State)
	require.Equal(t, second, dirs[1].Path)
	got := consumeAll(t, c, "logs", 4)
	total := 0
	for p, rs := range got {
		st, err := c.PartitionStatus(ctx, "logs", p)
		require.NoError(t, err)
		require.Equal(t, second, st.LogDir)
		total += len(rs)
	}
	require.Equal(t, 4*mib/1024, total)
	names, err := os.ReadDir(first)
	require.NoError(t, err)
	for _, e := range names {
		require.False(t, e.IsDir(), "no partition left in the drained dir: %s", e.Name())
	}

	// The drained dir can now be removed: a restart without it serves
	// everything from the other.
	require.NoError(t, n.Stop())
	require.NoError(t, os.RemoveAll(first))
	cfg.LogDirs = []LogDir{{Path: second, Capacity: 1 << 30}}
	n = startNode(t, cfg)
	c = newClient(t, n.Address())
	dirs = describeDirs(t, n)
	require.Len(t, dirs, 1)
	require.Equal(t, second, dirs[0].Path)
	got = consumeAll(t, c, "logs", 4)
	total = 0
	for _, rs := range got {
		total += len(rs)
	}
	require.Equal(t, 4*mib/1024, total)
}

// disks add refuses a path that does not exist, rather than create it on
// whatever file system holds its parent, and one on the file system of
// another log dir when neither declares a capacity, unless forced; a
// refusal changes nothing.
func TestAddLogDirRefusals(t *testing.T) {
	root := t.TempDir()
	cfg := diskTestConfig(t, disks.PolicyLoad, LogDir{Path: filepath.Join(root, "first")})
	n := startNode(t, cfg)
	add := func(path string, capacity int64, force bool) *messages.AddLogDirResponse {
		return request[*messages.AddLogDirResponse](t, n, n.Placement(), &messages.AddLogDirRequest{Path: path, CapacityBytes: capacity, Force: force})
	}
	stateBefore, _ := os.ReadFile(filepath.Join(cfg.DataDir, disks.DisksStateFile))

	missing := filepath.Join(root, "mnt", "typo")
	resp := add(missing, 0, false)
	require.Equal(t, messages.ErrorCode_LOG_DIR_NOT_FOUND, resp.Error)
	require.Contains(t, resp.ErrorMessage, missing+" does not exist")
	require.NoDirExists(t, missing)
	require.NoDirExists(t, filepath.Dir(missing))

	same := filepath.Join(root, "same")
	require.NoError(t, os.Mkdir(same, 0o755))
	resp = add(same, 0, false)
	require.Equal(t, messages.ErrorCode_INVALID_REQUEST, resp.Error)
	require.Contains(t, resp.ErrorMessage, "same file system as log dir "+filepath.Join(root, "first"))
	require.Contains(t, resp.ErrorMessage, "--force")
	stateAfter, _ := os.ReadFile(filepath.Join(cfg.DataDir, disks.DisksStateFile))
	require.Equal(t, stateBefore, stateAfter, "a refused add records nothing")
	require.Len(t, describeDirs(t, n), 1)

	require.Equal(t, messages.ErrorCode_NONE, add(same, 1<<30, false).Error, "a declared capacity is enough")
	forced := filepath.Join(root, "forced")
	require.NoError(t, os.Mkdir(forced, 0o755))
	require.Equal(t, messages.ErrorCode_INVALID_REQUEST, add(forced, 0, false).Error)
	require.Equal(t, messages.ErrorCode_NONE, add(forced, 0, true).Error)
	require.Len(t, describeDirs(t, n), 3)
}

// A drain is undone by undrain, survives a restart either way, and a
// drained, empty dir is removed; a start that still names it is refused,
// saying what to do.
func TestDrainUndrainRemove(t *testing.T) {
	root := t.TempDir()
	first, second := filepath.Join(root, "first"), filepath.Join(root, "second")
	cfg := diskTestConfig(t, disks.PolicyLoad, LogDir{Path: first, Capacity: 1 << 30}, LogDir{Path: second, Capacity: 1 << 30})
	n := startNode(t, cfg)
	c := newClient(t, n.Address())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := c.CreateTopic(ctx, "logs", 4, nil)
	require.NoError(t, err)
	fill(t, c, "logs", 4, mib)

	require.ErrorContains(t, c.UndrainLogDir(ctx, "", first), "not draining")
	require.ErrorContains(t, c.RemoveLogDir(ctx, "", first), "drain it first")
	_, err = c.DrainLogDir(ctx, "", first)
	require.NoError(t, err)
	require.NoError(t, c.UndrainLogDir(ctx, "", first))
	require.Equal(t, disks.LogDirOnline, describeDirs(t, n)[0].State)
	_, err = c.DrainLogDir(ctx, "", first)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		dirs := describeDirs(t, n)
		return dirs[0].Partitions == 0 && dirs[0].State == disks.LogDirDraining
	}, 30*time.Second, 20*time.Millisecond)

	// Across a restart the drain stays, and is still undone by undrain.
	require.NoError(t, n.Stop())
	n = startNode(t, cfg)
	c = newClient(t, n.Address())
	require.Equal(t, disks.LogDirDraining, describeDirs(t, n)[0].State)
	require.NoError(t, c.UndrainLogDir(ctx, "", first))
	require.NoError(t, n.Stop())
	n = startNode(t, cfg)
	c = newClient(t, n.Address())
	require.Equal(t, disks.LogDirOnline, describeDirs(t, n)[0].State)

	// Drained and empty, it is removed: the node runs on without it, its
	// files left where they were.
	_, err = c.DrainLogDir(ctx, "", first)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		return describeDirs(t, n)[0].Partitions == 0 && c.RemoveLogDir(ctx, "", first) == nil
	}, 30*time.Second, 20*time.Millisecond)
	dirs := describeDirs(t, n)
	require.Len(t, dirs, 1)
	require.Equal(t, second, dirs[0].Path)
	require.FileExists(t, filepath.Join(first, disks.MetaPropertiesFile))
	records := consumeAll(t, c, "logs", 4)
	require.NoError(t, n.Stop())

	_, err = Start(cfg)
	require.ErrorContains(t, err, "log dir "+first+" was removed")
	require.ErrorContains(t, err, "drop it from --log-dirs")
	cfg.LogDirs = cfg.LogDirs[1:]
	n = startNode(t, cfg)
	c = newClient(t, n.Address())
	require.Equal(t, records, consumeAll(t, c, "logs", 4), "every record is still there")
}
