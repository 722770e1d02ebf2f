package node

import (
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"

	"github.com/depot-dev/depot/actors/controller"
	"github.com/depot-dev/depot/actors/disks"
	"github.com/depot-dev/depot/actors/group"
	"github.com/depot-dev/depot/actors/metadata"
	"github.com/depot-dev/depot/actors/partition"
	"github.com/depot-dev/depot/disk"
)

// Defaults of a node started with no settings at all.
const (
	DefaultDataDir = "./data"
	DefaultListen  = "127.0.0.1:7070"
	DefaultHTTP    = "127.0.0.1:7071"
	// DefaultKafkaListen is where `depot node` takes Kafka clients,
	// Kafka's own default port; the zero Config has no Kafka listener.
	DefaultKafkaListen = "127.0.0.1:9092"
	// DefaultLogDirCount is how many log directories a node makes under its
	// data directory when none are named.
	DefaultLogDirCount = 2
)

// LogDir is one log directory (a disk) of a node.
type LogDir struct {
	Path string
	// Capacity in bytes, when declared (PATH=100GiB); 0 means ask the file
	// system.
	Capacity int64
}

// Config is a node's configuration. The zero value is a working single
// node on 127.0.0.1, without the HTTP listener: Start fills in every unset
// field, and DefaultConfig spells those defaults out.
type Config struct {
	// NodeID identifies the node in a cluster. Default 1.
	NodeID int32
	// DataDir holds the metadata log and, when LogDirs is empty, the log
	// directories. Default ./data.
	DataDir string
	// LogDirs are the directories partitions live in. Default two, under
	// DataDir: logs-0 and logs-1.
	LogDirs []LogDir
	// Listen is the actor address (protoactor remote). Default
	// 127.0.0.1:7070; port 0 picks a free port.
	Listen string
	// HTTP is the address of /healthz, /metrics and Go's profiles under
	// /debug/pprof/. Default 127.0.0.1:7071; empty disables it.
	HTTP string
	// KafkaListen is the address of the Kafka protocol listener, which
	// Kafka clients (kcat, franz-go, the Java client) connect to as to a
	// Kafka broker; port 0 picks a free port. Empty, the default, has
	// none, so that nodes in one process do not contend for a port;
	// DefaultConfig, and so `depot node`, has DefaultKafkaListen.
	KafkaListen string
	// KafkaAdvertised is the Kafka address given out in metadata, for
	// clients that reach the node by another address than KafkaListen.
	// Default KafkaListen, with its port resolved.
	KafkaAdvertised string
	// LogLevel is one of logrus's levels. Default info.
	LogLevel string
	// TickInterval is how often partitions apply retention and report.
	// Default 10 s.
	TickInterval time.Duration
	// ReplicaLagMax is replica.lag.time.max.ms: a follower that has not
	// caught up with its leader for this long leaves the ISR. Default
	// partition.DefaultReplicaLagMax (10 s).
	ReplicaLagMax time.Duration
	// ReplicaFetchLinger is how long a follower's parked fetch that an
	// append wakes waits for more appends, when the leader answered that
	// follower less than that long ago, so that the appends of that time
	// go in one answer (see partition.PartitionManagerConfig). Each answer
	// is a round of messages between the nodes and their actors (a batch
	// at 10k records/s cost some 13 context switches on each node of three
	// sharing two cores), so a linger saves CPU while appends come faster
	// than a fetch round trip but delays acks=all by up to that time. 0
	// (the default) answers at once. Three nodes of one 2-core machine, RF 3 acks=all on replica
	// streams, 2 ms against 0: at 10k records/s 0.84-0.89 cores of the
	// nodes against 0.99, p50 3.5-3.6 ms against 2.6-2.7; at 170k (half of
	// saturation) the same CPU, and p99 a median 34 ms in eight runs
	// against 16 in eleven, worse in six of eight alternated pairs; at
	// saturation 2 ms made 2-6 % more in four of five alternated pairs.
	ReplicaFetchLinger time.Duration
	// Policy places new partitions: "load" (default: by projected bytes
	// against capacity, spread per topic) or "count" (Kafka's rule).
	Policy string
	// Balance tunes the balancer that moves partitions between log
	// directories. Its ThrottleBytesPerS also bounds the fetch rate of
	// the replicas a reassignment adds to the node, until they are in
	// sync.
	Balance disks.BalanceSettings
	// DiskReserve is each log dir's free-space reserve: under it the dir is
	// full, refusing appends while reads go on, until twice as much is
	// free. Default the smaller of 5% of its capacity and 5 GiB. A declared
	// capacity (PATH=CAP) is enforced as a quota: the dir holds at most CAP
	// less the reserve.
	DiskReserve disks.Reserve
	// OffsetsTopicPartitions is the partition count __consumer_offsets is
	// created with (Kafka's offsets.topic.num.partitions). Default 50.
	OffsetsTopicPartitions int32
	// OffsetsTopicSegmentBytes is the segment.bytes of __consumer_offsets
	// (Kafka's offsets.topic.segment.bytes). Default 100 MiB.
	OffsetsTopicSegmentBytes int64
	// OffsetsCleanBytes is how many superseded bytes an offsets partition
	// may hold before it is cleaned. Default 16 MiB.
	OffsetsCleanBytes int64
	// GroupMetadataInterval is how often a stable group checks its topics'
	// partition counts. Default 5 s.
	GroupMetadataInterval time.Duration
	// GroupInitialRebalanceDelay is Kafka's group.initial.rebalance.delay.ms:
	// how long the first rebalance of an empty group of Kafka's classic
	// protocol waits for more members, so that consumers started together
	// rebalance once. The zero value waits for none, for nodes in tests;
	// DefaultConfig, and so `depot node`, has Kafka's 3 s.
	GroupInitialRebalanceDelay time.Duration
	// Controllers are the voters of the controller quorum, as Kafka's
	// controller.quorum.voters: a node listed runs a voting replica of the
	// metadata log, the others follow it as learners. Empty: a quorum of
	// one, this node, which is then the whole cluster.
	Controllers []Voter
	// Rack is the node's rack, for rack-aware replica placement.
	Rack string
	// Quorum tunes the controller quorum and the node's session with it.
	Quorum QuorumSettings
	// MaxOpenFiles bounds the descriptors the node's partition logs hold
	// open at once (their segment files, .log, .index and .timeindex, and
	// the directories they sync), whatever its partition count: the files
	// least recently used are closed and reopened on their next use (see
	// disk.FileCache: a file in use stays open, one holding unsynced bytes
	// is synced before it is closed). Default DefaultMaxOpenFiles(): the
	// process's limit less 4096, or half of it when it is lower. Nodes that share a process set theirs, so that
	// together they stay under its limit.
	MaxOpenFiles int
	// KeepWrittenBytes bounds the bytes of the node's newest log writes
	// left in the OS page cache, across its partitions: older written
	// bytes are dropped from the page cache once their writeback has
	// started (see disk.FileCache.KeepWritten). Readers at the tail,
	// followers and consumers keeping up, read from the bytes kept; a
	// reader further behind reads from the device. Default
	// DefaultKeepWrittenBytes; below 0: no bound, every written page
	// stays until the kernel reclaims it.
	KeepWrittenBytes int64
	// SyncfsPartitions is the fewest partitions for which a log dir's
	// group commit syncs its whole file system at once (syncfs) rather
	// than each partition's file (see disks.FlusherConfig.FileSystemSyncFlushes):
	// far cheaper with many partitions, but it also writes back whatever
	// else the file system holds unsynced. Default
	// disks.DefaultFileSystemSyncFlushes (16); negative: never, for log
	// dirs on a file system that other heavy writers share.
	SyncfsPartitions int
	// FS is the file system; default the operating system's.
	FS disk.FS
	// Logger overrides the logger built from LogLevel.
	Logger *logrus.Logger
}

// DefaultConfig returns the settings of a node given none, each spelled
// out: what Start fills in for an unset field, HTTP on DefaultHTTP (the zero
// Config has no HTTP listener) and the balancer's defaults. LogDirs stays
// empty, so that the log directories follow DataDir.
func DefaultConfig() Config {
	c := Config{HTTP: DefaultHTTP, KafkaListen: DefaultKafkaListen, GroupInitialRebalanceDelay: group.DefaultInitialRebalanceDelay, Balance: disks.DefaultBalanceSettings()}.withDefaults()
	c.LogDirs = nil
	return c
}

// withDefaults returns c with every unset field defaulted.
func (c Config) withDefaults() Config {
	if c.NodeID == 0 {
		c.NodeID = 1
	}
	if c.DataDir == "" {
		c.DataDir = DefaultDataDir
	}
	if len(c.LogDirs) == 0 {
		for i := 0; i < DefaultLogDirCount; i++ {
			c.LogDirs = append(c.LogDirs, LogDir{Path: filepath.Join(c.DataDir, fmt.Sprintf("logs-%d", i))})
		}
	}
	for i := range c.LogDirs {
		c.LogDirs[i].Path = filepath.Clean(c.LogDirs[i].Path)
	}
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	if c.LogLevel == "" {
		c.LogLevel = "info"
	}
	if c.ReplicaLagMax == 0 {
		c.ReplicaLagMax = partition.DefaultReplicaLagMax
	}
	if c.TickInterval == 0 {
		c.TickInterval = 10 * time.Second
	}
	if c.Policy == "" {
		c.Policy = disks.PolicyLoad
	}
	if c.FS == nil {
		c.FS = disk.OS
	}
	if c.MaxOpenFiles == 0 {
		c.MaxOpenFiles = DefaultMaxOpenFiles()
	}
	if c.KeepWrittenBytes == 0 {
		c.KeepWrittenBytes = DefaultKeepWrittenBytes
	}
	if c.SyncfsPartitions == 0 {
		c.SyncfsPartitions = disks.DefaultFileSystemSyncFlushes
	}
	if c.OffsetsTopicPartitions == 0 {
		c.OffsetsTopicPartitions = group.DefaultOffsetsTopicPartitions
	}
	if c.OffsetsTopicSegmentBytes == 0 {
		c.OffsetsTopicSegmentBytes = group.DefaultOffsetsSegmentBytes
	}
	if c.OffsetsCleanBytes == 0 {
		c.OffsetsCleanBytes = group.DefaultOffsetsCleanBytes
	}
	if c.GroupMetadataInterval == 0 {
		c.GroupMetadataInterval = group.DefaultGroupMetadataInterval
	}
	if c.Quorum.LeaderRebalanceInterval == 0 {
		c.Quorum.LeaderRebalanceInterval = controller.DefaultLeaderRebalanceInterval
	}
	if c.Quorum.SnapshotEvery == 0 {
		c.Quorum.SnapshotEvery = controller.DefaultSnapshotEvery
	}
	return c
}

// validate reports the first setting that cannot work.
func (c Config) validate() error {
	var errs []error
	if c.NodeID <= 0 {
		errs = append(errs, fmt.Errorf("node id %d: node ids start at 1 (0 is raft's \"no node\")", c.NodeID))
	}
	if err := validateVoters(c.Controllers, c.NodeID, c.Listen); err != nil {
		errs = append(errs, err)
	}
	if _, _, err := splitHostPort(c.Listen); err != nil {
		errs = append(errs, fmt.Errorf("listen address %q: %w", c.Listen, err))
	}
	if c.HTTP != "" {
		if _, _, err := splitHostPort(c.HTTP); err != nil {
			errs = append(errs, fmt.Errorf("http address %q: %w", c.HTTP, err))
		}
	}
	if c.KafkaListen != "" {
		if _, _, err := splitHostPort(c.KafkaListen); err != nil {
			errs = append(errs, fmt.Errorf("kafka listen address %q: %w", c.KafkaListen, err))
		}
	}
	if c.KafkaAdvertised != "" {
		if c.KafkaListen == "" {
			errs = append(errs, fmt.Errorf("kafka advertised address %q without a kafka listen address", c.KafkaAdvertised))
		} else if _, port, err := splitHostPort(c.KafkaAdvertised); err != nil || port == 0 {
			errs = append(errs, fmt.Errorf("kafka advertised address %q: want host:port with a port", c.KafkaAdvertised))
		}
	}
	if _, err := logrus.ParseLevel(c.LogLevel); err != nil {
		errs = append(errs, fmt.Errorf("log level %q: want one of panic, fatal, error, warn, info, debug, trace", c.LogLevel))
	}
	seen := map[string]bool{}
	for _, d := range c.LogDirs {
		abs, err := filepath.Abs(d.Path)
		if err != nil || d.Path == "" {
			errs = append(errs, fmt.Errorf("log dir %q is not a usable path", d.Path))
			continue
		}
		if seen[abs] {
			errs = append(errs, fmt.Errorf("log dir %q is named twice", d.Path))
		}
		seen[abs] = true
		if d.Capacity < 0 {
			errs = append(errs, fmt.Errorf("log dir %q: negative capacity", d.Path))
		}
	}
	if c.Policy != disks.PolicyLoad && c.Policy != disks.PolicyCount {
		errs = append(errs, fmt.Errorf("placement policy %q: want load or count", c.Policy))
	}
	if b := c.Balance; b.MaxDeviation < 0 || b.HighWater < 0 || b.HighWater > 1 {
		errs = append(errs, fmt.Errorf("balance settings out of range: max deviation %v, high water %v", b.MaxDeviation, b.HighWater))
	}
	if c.OffsetsTopicPartitions < 1 || c.OffsetsTopicPartitions > metadata.MaxPartitionsPerTopic {
		errs = append(errs, fmt.Errorf("offsets.topic.num.partitions %d: must be between 1 and %d", c.OffsetsTopicPartitions, metadata.MaxPartitionsPerTopic))
	}
	if c.OffsetsTopicSegmentBytes < 0 || c.OffsetsCleanBytes < 0 || c.GroupMetadataInterval < 0 || c.GroupInitialRebalanceDelay < 0 {
		errs = append(errs, fmt.Errorf("offsets segment bytes %d, clean bytes %d, group metadata interval %v and initial rebalance delay %v must not be negative",
			c.OffsetsTopicSegmentBytes, c.OffsetsCleanBytes, c.GroupMetadataInterval, c.GroupInitialRebalanceDelay))
	}
	if c.TickInterval < 0 {
		errs = append(errs, fmt.Errorf("tick interval %v is negative", c.TickInterval))
	}
	if c.ReplicaLagMax < 0 {
		errs = append(errs, fmt.Errorf("replica lag time %v is negative", c.ReplicaLagMax))
	}
	if c.ReplicaFetchLinger < 0 {
		errs = append(errs, fmt.Errorf("replica fetch linger %v is negative", c.ReplicaFetchLinger))
	}
	if limit := processFileLimit(); c.MaxOpenFiles < 1 || limit > 0 && uint64(c.MaxOpenFiles) > limit {
		errs = append(errs, fmt.Errorf("max open files %d: want at least 1 and at most the process's open-file limit, %d (ulimit -n)", c.MaxOpenFiles, limit))
	}
	if len(errs) > 0 {
		return fmt.Errorf("node: invalid config: %w", errors.Join(errs...))
	}
	return nil
}

// DefaultKeepWrittenBytes is the KeepWrittenBytes of a node given none.
const DefaultKeepWrittenBytes = 1 << 30

// DefaultMaxOpenFiles is the MaxOpenFiles of a node given none: the
// process's limit on open files (the soft RLIMIT_NOFILE, which Go raises
// to the hard limit at start-up) less a reserve of openFilesReserve, or
// of half the limit when that is less, for sockets, the metadata log,
// lock files and checkpoints; 1024 when the limit cannot be read, and at
// most 1<<20.
func DefaultMaxOpenFiles() int {
	limit := processFileLimit()
	if limit == 0 {
		return 1024
	}
	return int(max(1, min(limit-min(limit/2, openFilesReserve), 1<<20)))
}

// openFilesReserve is the descriptors DefaultMaxOpenFiles leaves to what
// is not a partition's file: a node holds a few dozen of them and one
// socket a client connection. With a limit of 20,000, half of it left the
// 10,000 .log files of 10,000 partitions, with their indexes, 10,000
// descriptors, and every append reopened its file; 15,904 keep them open.
const openFilesReserve = 4096

// processFileLimit is the soft RLIMIT_NOFILE of the process, 0 when it
// cannot be read.
func processFileLimit() uint64 {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil {
		return 0
	}
	return rl.Cur
}

func splitHostPort(addr string) (string, int, error) {
	host, portText, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(portText)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("bad port %q", portText)
	}
	return host, port, nil
}

// ParseLogDirs parses a comma-separated list of PATH or PATH=SIZE entries,
// where SIZE is bytes with an optional unit (KiB, MiB, GiB, TiB, KB, MB, GB,
// TB), as in "--log-dirs /mnt/a=100GiB,/mnt/b".
func ParseLogDirs(s string) ([]LogDir, error) {
	var dirs []LogDir
	for _, entry := range strings.Split(s, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		path, size, hasSize := strings.Cut(entry, "=")
		d := LogDir{Path: path}
		if path == "" {
			return nil, fmt.Errorf("log dir %q: empty path", entry)
		}
		if hasSize {
			n, err := ParseBytes(size)
			if err != nil {
				return nil, fmt.Errorf("log dir %q: %w", entry, err)
			}
			d.Capacity = n
		}
		dirs = append(dirs, d)
	}
	if len(dirs) == 0 {
		return nil, errors.New("no log dir named")
	}
	return dirs, nil
}

// formatBytes renders n in the largest binary unit that divides it exactly
// (64MiB, 1536KiB, 1000), so that ParseBytes reads n back.
func formatBytes(n int64) string {
	units := []string{"KiB", "MiB", "GiB", "TiB"}
	unit := ""
	for _, u := range units {
		if n == 0 || n%1024 != 0 {
			break
		}
		n, unit = n/1024, u
	}
	return strconv.FormatInt(n, 10) + unit
}

// ParseReserve parses a free-space reserve: a size (ParseBytes) or a
// percentage of capacity ("5%").
func ParseReserve(s string) (disks.Reserve, error) {
	if pct, ok := strings.CutSuffix(strings.TrimSpace(s), "%"); ok {
		p, err := strconv.ParseFloat(pct, 64)
		if err != nil || p <= 0 || p >= 100 {
			return disks.Reserve{}, fmt.Errorf("%q: want a percentage between 0 and 100", s)
		}
		return disks.Reserve{Percent: p}, nil
	}
	n, err := ParseBytes(s)
	if err != nil {
		return disks.Reserve{}, err
	}
	if n <= 0 {
		return disks.Reserve{}, fmt.Errorf("%q: want more than 0", s)
	}
	return disks.Reserve{Bytes: n}, nil
}

// ParseBytes parses a size such as 512, 64KiB, 10MB or 1.5GiB.
func ParseBytes(s string) (int64, error) {
	units := []struct {
		suffix string
		scale  float64
	}{
		{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
		{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"B", 1},
	}
	text := strings.TrimSpace(s)
	scale := 1.0
	for _, u := range units {
		if strings.HasSuffix(text, u.suffix) {
			text, scale = strings.TrimSpace(strings.TrimSuffix(text, u.suffix)), u.scale
			break
		}
	}
	f, err := strconv.ParseFloat(text, 64)
	if err != nil || f < 0 || f*scale > 1<<62 {
		return 0, fmt.Errorf("bad size %q: want a number of bytes with an optional unit such as 100GiB", s)
	}
	return int64(f * scale), nil
}
