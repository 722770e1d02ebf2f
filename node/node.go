// Package node starts and stops one Depot node: its actor system and remote
// listener, the metadata actor, the log-dir actors, the partition manager and
// its partition actors, and the HTTP endpoint for health and metrics. It is
// the only package that knows every actor's props.
package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/sirupsen/logrus"

	"github.com/depot-dev/depot/actors"
	"github.com/depot-dev/depot/actors/controller"
	"github.com/depot-dev/depot/actors/disks"
	"github.com/depot-dev/depot/actors/group"
	"github.com/depot-dev/depot/actors/kafka"
	"github.com/depot-dev/depot/actors/partition"
	depotremote "github.com/depot-dev/depot/actors/remote"
	"github.com/depot-dev/depot/actors/topic"
	"github.com/depot-dev/depot/disk"
	"github.com/depot-dev/depot/messages"
)

// startTimeout bounds each step of start-up and shut-down that waits on an
// actor.
const startTimeout = 30 * time.Second

// stopPartitionsTimeout bounds the wait for every partition to close its
// log at a clean stop: each syncs what it has not, and a node may hold tens
// of thousands.
const stopPartitionsTimeout = 5 * time.Minute

// Node is a running Depot node.
type Node struct {
	cfg       Config
	logger    *logrus.Entry
	system    *actor.ActorSystem
	remote    *remote.Remote
	transport *depotremote.Transport
	address   string
	metadata  *actor.PID
	manager   *actor.PID
	placement *actor.PID
	groups    *actor.PID
	logDirs   []*actor.PID
	mu        sync.Mutex // guards logDirs and locks, which grow when a directory is added
	http      *http.Server
	httpAddr  string
	// kafkaListener is the bound Kafka port until kafka serves on it;
	// kafkaAddr is the Kafka address the node registers with.
	kafkaListener net.Listener
	kafka         *kafka.Listener
	kafkaAddr     string
	locks         []*os.File // guarded by mu
	registry      *prometheus.Registry
	// files is the cache every partition log opens its segment files
	// through.
	files *disk.FileCache
	// services runs the mailboxes of the actors that every produce and
	// fetch goes through, besides the partitions' own: the partition
	// manager, its replica fetchers, and the log dirs and their flushers.
	services *actors.WorkerDispatcher
	// partitionMetrics are the figures of the node's partitions.
	partitionMetrics *partition.Metrics
	stopped          bool
	stoppedCh        chan struct{}
	// locations maps each partition found on disk at start-up to the log
	// directory holding it, once interrupted moves are resolved.
	locations map[disk.TopicPartition]string
	// dirIDs maps each log directory's path at start-up to its id.
	dirIDs map[string]string
	// props are the meta.properties of the node's log directories, by
	// path. Guarded by mu.
	props map[string]disks.MetaProperties
}

// Start starts a node with cfg and returns once it serves: every partition
// in its metadata has its actor, and those with other replicas have their
// logs open. The others open their logs (recovering them after an unclean
// stop) in the background, a few at a time, and each on its first request,
// which waits for it (the metric depot_partitions_unopened counts those
// left).
func Start(cfg Config) (_ *Node, err error) {
	named := len(cfg.LogDirs) > 0
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	baseLogger := cfg.Logger
	if baseLogger == nil {
		baseLogger = logrus.New()
		level, _ := logrus.ParseLevel(cfg.LogLevel)
		baseLogger.SetLevel(level)
	}
	n := &Node{cfg: cfg, logger: baseLogger.WithField("node", cfg.NodeID), stoppedCh: make(chan struct{}), props: map[string]disks.MetaProperties{}}
	n.services = actors.NewWorkerDispatcher(300, serviceWorkers, 5*time.Second)
	defer func() {
		if err != nil {
			n.abort()
		}
	}()

	if err := mkdirDurable(cfg.FS, cfg.DataDir); err != nil {
		return nil, fmt.Errorf("node: data dir: %w", err)
	}
	if cfg.FS == disk.OS {
		if err := n.lockDir(cfg.DataDir, "data dir"); err != nil {
			return nil, err
		}
	}
	for _, d := range cfg.LogDirs {
		if err := mkdirDurable(cfg.FS, d.Path); err != nil {
			return nil, fmt.Errorf("node: log dir %s: %w", d.Path, err)
		}
	}
	n.system = actors.NewActorSystem(baseLogger)
	if err := n.startRemote(); err != nil {
		return nil, err
	}
	if err := n.bindKafka(); err != nil {
		return nil, err
	}
	root := n.system.Root

	disksState, err := disks.ReadDisksState(cfg.FS, cfg.DataDir)
	if err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	specs, added, err := logDirSpecs(cfg.LogDirs, named, disksState)
	if err != nil {
		return nil, err
	}
	for _, d := range added {
		if err := cfg.FS.MkdirAll(d.Path, 0o755); err != nil {
			return nil, fmt.Errorf("node: log dir %s: %w", d.Path, err)
		}
	}
	for i := range specs {
		if specs[i].ID, err = n.openLogDir(specs[i].Path); err != nil {
			return nil, err
		}
	}
	if err := n.recoverMoves(specs); err != nil {
		return nil, err
	}
	// Log-dir actors have names derived from their paths, so the actors
	// that talk to them can be told their PIDs before they are spawned.
	logDirPIDs := map[string]*actor.PID{}
	n.dirIDs = map[string]string{}
	dirPaths := map[string]string{}
	for _, d := range specs {
		logDirPIDs[d.Path] = actor.NewPID(n.address, actors.LogDirActorName(d.Path))
		n.dirIDs[d.Path] = d.ID
		dirPaths[d.ID] = d.Path
	}
	checkpoints := map[string]disks.Checkpoints{}
	for _, d := range specs {
		cp := disks.ReadCheckpoints(cfg.FS, d.Path, n.logger.WithField("dir", d.Path))
		// A partition that moved away has no checkpoint here any more.
		for _, m := range []map[disk.TopicPartition]int64{cp.RecoveryPoints, cp.LogStart} {
			for tp := range m {
				if dir, ok := n.locations[tp]; ok && dir != d.Path {
					delete(m, tp)
				}
			}
		}
		checkpoints[d.Path] = cp
	}

	n.registry = prometheus.NewRegistry()
	n.partitionMetrics = partition.NewMetrics(n.registry)
	n.files = disk.NewFileCache(cfg.MaxOpenFiles)
	n.files.KeepWritten(cfg.KeepWrittenBytes)
	n.manager, err = root.SpawnNamed(partition.NewPartitionManagerProps(partition.PartitionManagerConfig{
		FS:                 cfg.FS,
		Files:              n.files,
		NodeID:             cfg.NodeID,
		Transport:          n.transport,
		LogDirs:            logDirPIDs,
		DirIDs:             clone(n.dirIDs),
		Placement:          actor.NewPID(n.address, actors.PlacementActorName),
		Checkpoints:        checkpoints,
		TickInterval:       cfg.TickInterval,
		Controller:         actor.NewPID(n.address, actors.MetadataActorName),
		ReplicaLagMax:      cfg.ReplicaLagMax,
		ReplicaThrottle:    replicaThrottle(cfg.Balance),
		ReplicaFetchLinger: cfg.ReplicaFetchLinger,
		Metrics:            n.partitionMetrics,
		AwaitMetadata:      true,
		Dispatcher:         n.services,
		Logger:             n.logger,
	}), actors.PartitionManagerName)
	if err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	n.placement, err = root.SpawnNamed(disks.NewPlacementProps(disks.PlacementConfig{
		NodeID:           cfg.NodeID,
		FS:               cfg.FS,
		DataDir:          cfg.DataDir,
		Policy:           cfg.Policy,
		LogDirs:          specs,
		AddedLogDirs:     added,
		Balance:          cfg.Balance,
		PartitionManager: n.manager,
		OpenLogDir:       n.openLogDir,
		StopLogDir:       n.stopLogDir,
		Removed:          disksState.Removed,
		StartLogDir:      func(spec disks.LogDirSpec) (*actor.PID, error) { return n.startLogDir(spec, disks.Checkpoints{}) },
		Logger:           n.logger,
	}), actors.PlacementActorName)
	if err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	for _, d := range specs {
		cp := checkpoints[d.Path]
		if _, err := n.startLogDir(d, disks.Checkpoints{RecoveryPoints: clone(cp.RecoveryPoints), LogStart: clone(cp.LogStart)}); err != nil {
			return nil, fmt.Errorf("node: %w", err)
		}
	}

	logDirPaths := make([]string, len(specs))
	for i, d := range specs {
		logDirPaths[i] = d.Path
	}
	n.mu.Lock()
	cluster, err := clusterID(n.props)
	n.mu.Unlock()
	if err != nil {
		return nil, err
	}
	n.metadata, err = root.SpawnNamed(controller.NewProps(controller.Config{
		FS:                      cfg.FS,
		Dir:                     filepath.Join(cfg.DataDir, "meta"),
		NodeID:                  cfg.NodeID,
		Address:                 n.address,
		KafkaAddress:            n.kafkaAddr,
		Rack:                    cfg.Rack,
		Voters:                  voterMap(cfg.Controllers),
		ClusterID:               cluster,
		SaveClusterID:           n.saveClusterID,
		LogDirs:                 dirPaths,
		PartitionManager:        n.manager,
		Placement:               n.placement,
		TickInterval:            cfg.Quorum.TickInterval,
		ElectionTicks:           cfg.Quorum.ElectionTicks,
		HeartbeatInterval:       cfg.Quorum.HeartbeatInterval,
		SessionTimeout:          cfg.Quorum.SessionTimeout,
		SnapshotEvery:           cfg.Quorum.SnapshotEvery,
		LeaderRebalanceInterval: cfg.Quorum.LeaderRebalanceInterval,
		Logger:                  n.logger,
	}), actors.MetadataActorName)
	if err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	if open, err := actors.Request[*actors.Registration](context.Background(), root, n.metadata, &controller.CheckOpen{}, startTimeout); err != nil {
		return nil, fmt.Errorf("node: %w", err)
	} else if open.Err != nil {
		return nil, fmt.Errorf("node: %w", open.Err)
	}
	if err := n.startPartitions(); err != nil {
		return nil, err
	}
	if cfg.quorumOfOne() {
		// The node is the cluster: it serves once it is registered in it.
		ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
		err := n.WaitRegistered(ctx)
		cancel()
		if err != nil {
			return nil, err
		}
	}
	// The group coordinator loads __consumer_offsets when it exists and
	// creates it on the first group request otherwise, as Kafka does.
	n.groups, err = root.SpawnNamed(group.NewGroupsProps(group.GroupsConfig{
		NodeID:            cfg.NodeID,
		Address:           n.address,
		KafkaAddress:      n.kafkaAddr,
		Metadata:          n.metadata,
		OffsetsPartitions: cfg.OffsetsTopicPartitions,
		OffsetsTopicConfigs: map[string]string{
			topic.ConfigRetentionMs:  "-1",
			topic.ConfigSegmentBytes: fmt.Sprint(cfg.OffsetsTopicSegmentBytes),
		},
		CleanBytes:            cfg.OffsetsCleanBytes,
		MetadataInterval:      cfg.GroupMetadataInterval,
		InitialRebalanceDelay: cfg.GroupInitialRebalanceDelay,
		// A quorum of one is the cluster: its metadata is the cluster's.
		AwaitRegistration: !cfg.quorumOfOne(),
		Logger:            n.logger,
	}), actors.GroupCoordinatorName)
	if err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	if err := n.startHTTP(); err != nil {
		return nil, err
	}
	if err := n.startKafka(); err != nil {
		return nil, err
	}
	n.logger.WithFields(logrus.Fields{"address": n.address, "http": n.httpAddr, "kafka": n.kafkaAddr, "log_dirs": logDirPaths}).Info("node started")
	return n, nil
}

// logDirSpecs returns the log directories to run: the configured ones (in
// their order, draining when the state says so), then those added at run
// time; added lists the latter.
func logDirSpecs(configured []LogDir, named bool, st disks.DisksState) (specs, added []disks.LogDirSpec, err error) {
	draining := map[string]bool{}
	for _, path := range st.Draining {
		draining[filepath.Clean(path)] = true
	}
	removed := map[string]bool{}
	for _, path := range st.Removed {
		removed[filepath.Clean(path)] = true
	}
	seen := map[string]bool{}
	for _, d := range configured {
		path := filepath.Clean(d.Path)
		if removed[path] {
			if named {
				return nil, nil, fmt.Errorf("node: log dir %s was removed (depot disks remove): drop it from --log-dirs, or add it back with depot disks add", path)
			}
			continue // a default dir, removed: the node goes on without it
		}
		seen[path] = true
		specs = append(specs, disks.LogDirSpec{Path: path, Capacity: d.Capacity, Draining: draining[path]})
	}
	for _, d := range st.Added {
		path := filepath.Clean(d.Path)
		if seen[path] {
			continue
		}
		seen[path] = true
		spec := disks.LogDirSpec{Path: path, Capacity: d.Capacity, Draining: draining[path]}
		specs = append(specs, spec)
		added = append(added, spec)
	}
	return specs, added, nil
}

// openLogDir locks the log directory path (on the OS file system) and
// returns its id, which it first writes when the directory has none.
func (n *Node) openLogDir(path string) (string, error) {
	if n.cfg.FS == disk.OS && filepath.Clean(path) != filepath.Clean(n.cfg.DataDir) {
		if err := n.lockDir(path, "log dir"); err != nil {
			return "", err
		}
	}
	mp, err := disks.EnsureMetaProperties(n.cfg.FS, path, n.cfg.NodeID)
	if err != nil {
		return "", fmt.Errorf("node: log dir %s: %w", path, err)
	}
	n.mu.Lock()
	n.props[filepath.Clean(path)] = mp
	n.mu.Unlock()
	return mp.DirectoryID, nil
}

// stopLogDir stops the log-dir actor of a removed directory and lets go of
// its lock. It runs on the placement actor's goroutine and does not wait.
func (n *Node) stopLogDir(path string) {
	name := actors.LogDirActorName(path)
	n.mu.Lock()
	defer n.mu.Unlock()
	for i, pid := range n.logDirs {
		if pid.Id == name {
			n.system.Root.Stop(pid)
			n.logDirs = append(n.logDirs[:i], n.logDirs[i+1:]...)
			break
		}
	}
	for i, f := range n.locks {
		if f.Name() == filepath.Join(path, lockFile) {
			f.Close()
			n.locks = append(n.locks[:i], n.locks[i+1:]...)
			break
		}
	}
}

// serviceWorkers bounds the node's service actors that run at once (see
// Node.services). None of them waits for another; a log dir writing its
// checkpoints may hold a worker for the time of an fsync.
//
// On protoactor's default dispatcher each of them got a new goroutine
// whenever its mailbox went from empty to busy, which is many times a
// millisecond under load, and each such goroutine grew its small stack
// by copying, down through the remote's serializer or a pass of fsyncs:
// at 120k records/s of RF 3 on three local nodes, growing stacks took
// 4-9 % of a node's CPU, and 2 % with the pool, whose goroutines keep
// their grown stacks.
const serviceWorkers = 16

// startLogDir spawns the log-dir actor of one directory.
func (n *Node) startLogDir(spec disks.LogDirSpec, cp disks.Checkpoints) (*actor.PID, error) {
	pid, err := n.system.Root.SpawnNamed(disks.NewLogDirProps(disks.LogDirConfig{
		Path:                  spec.Path,
		FS:                    n.cfg.FS,
		Capacity:              spec.Capacity,
		Draining:              spec.Draining,
		Reserve:               n.cfg.DiskReserve,
		Checkpoints:           cp,
		Placement:             n.placement,
		UsageInterval:         n.cfg.TickInterval,
		FileSystemSyncFlushes: n.cfg.SyncfsPartitions,
		Dispatcher:            n.services,
		Logger:                n.logger,
	}), actors.LogDirActorName(spec.Path))
	if err != nil {
		return nil, err
	}
	n.mu.Lock()
	n.logDirs = append(n.logDirs, pid)
	n.mu.Unlock()
	return pid, nil
}

func clone[K comparable, V any](m map[K]V) map[K]V {
	c := make(map[K]V, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

// mkdirDurable creates dir and its missing parents, and syncs the parent of
// each one it creates, so that a crash does not take the directory away
// with whatever was since written in it.
func mkdirDurable(fsys disk.FS, dir string) error {
	var created []string
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if _, err := fsys.Stat(d); err == nil {
			break
		}
		created = append(created, d)
		if d == filepath.Dir(d) {
			break
		}
	}
	if err := fsys.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for i := len(created) - 1; i >= 0; i-- {
		if err := fsys.SyncDir(filepath.Dir(created[i])); err != nil {
			return err
		}
	}
	return nil
}

// recoverMoves finishes or undoes the partition moves between log
// directories that a crash interrupted (disks.RecoverMoves), making each
// step durable, and records where every partition found on disk lives.
func (n *Node) recoverMoves(dirs []disks.LogDirSpec) error {
	fsys := n.cfg.FS
	listings := make([]disks.LogDirListing, 0, len(dirs))
	for _, d := range dirs {
		names, err := fsys.ReadDir(d.Path)
		if err != nil {
			return fmt.Errorf("node: list log dir %s: %w", d.Path, err)
		}
		listings = append(listings, disks.LogDirListing{Dir: d.Path, Names: names})
	}
	plan, err := disks.RecoverMoves(listings)
	if err != nil {
		return fmt.Errorf("node: log dirs: %w", err)
	}
	for _, a := range plan.Actions {
		var err error
		if a.Kind == disks.MoveRename {
			err = fsys.Rename(a.Path, a.To)
		} else {
			err = fsys.RemoveAll(a.Path)
		}
		if err == nil {
			err = fsys.SyncDir(filepath.Dir(a.Path))
		}
		if err != nil {
			return fmt.Errorf("node: recovering interrupted partition moves: %s: %w", a, err)
		}
		n.logger.WithField("action", a.String()).Warn("recovered an interrupted partition move")
	}
	n.locations = plan.Locations
	return nil
}

// startRemote starts protoactor remote on cfg.Listen. Remote panics when it
// cannot listen, so the address is tried first for a clear error.
func (n *Node) startRemote() (err error) {
	host, port, _ := splitHostPort(n.cfg.Listen)
	if port != 0 {
		l, err := net.Listen("tcp", n.cfg.Listen)
		if err != nil {
			return fmt.Errorf("node: cannot listen on %s: %w", n.cfg.Listen, err)
		}
		l.Close()
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("node: cannot listen on %s: %v", n.cfg.Listen, r)
		}
	}()
	n.transport = depotremote.NewTransport()
	n.remote = remote.NewRemote(n.system, n.transport.Config(host, port, n.logger))
	n.remote.Start()
	n.address = n.system.Address()
	return nil
}

// startPartitions starts every partition the metadata places on this node,
// each where its copy is found on disk, else in the directory the metadata
// names, else in one the node chooses, in the background (see Start); and then records in the metadata
// every directory that differs from what it held (a partition created or
// moved before a crash let the controller record it, or named by a path in
// records written before directory ids).
func (n *Node) startPartitions() error {
	ctx := context.Background()
	md, err := actors.Request[*messages.MetadataResponse](ctx, n.system.Root, n.metadata, &messages.MetadataRequest{}, startTimeout)
	if err != nil {
		return fmt.Errorf("node: reading metadata: %w", err)
	}
	count := 0
	var moved []*messages.PartitionAssignment
	for _, t := range md.Topics {
		req := &messages.StartPartitionsRequest{Configs: t.Configs}
		for _, p := range t.Partitions {
			recorded, holds := replicaDir(p, n.cfg.NodeID)
			if !holds {
				continue
			}
			a := &messages.PartitionAssignment{
				Topic: t.Name, Partition: p.Partition, NodeId: n.cfg.NodeID, DirId: recorded,
				Leader: p.Leader, LeaderAddress: p.LeaderAddress, Replicas: p.Replicas, Isr: p.Isr,
				LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch,
				AddingReplicas: p.AddingReplicas, RemovingReplicas: p.RemovingReplicas,
			}
			if path, ok := n.locations[disk.TopicPartition{Topic: t.Name, Partition: p.Partition}]; ok {
				a.LogDir, a.DirId = path, n.dirIDs[path]
				if a.DirId != recorded {
					moved = append(moved, a)
				}
			}
			req.Partitions = append(req.Partitions, a)
		}
		resp, err := actors.Request[*messages.StartPartitionsResponse](ctx, n.system.Root, n.manager, req, startTimeout)
		if err != nil {
			return fmt.Errorf("node: starting partitions of %s: %w", t.Name, err)
		}
		if resp.Error != messages.ErrorCode_NONE {
			n.logger.WithFields(logrus.Fields{"topic": t.Name, "error": resp.Error.String()}).Error("partitions not started: " + resp.ErrorMessage)
			continue
		}
		moved = append(moved, resp.Assigned...)
		count += len(req.Partitions)
	}
	if len(moved) > 0 {
		if err := n.recordDirs(moved, recordDirsWait); err != nil {
			// The partitions serve from where they are meanwhile: what the
			// metadata names is where the next start looks first.
			n.logger.WithError(err).Warn("log dirs of partitions not recorded in the metadata yet; retrying until the controller takes them")
			go n.recordDirsLater(moved)
		}
	}
	n.logger.WithFields(logrus.Fields{"topics": len(md.Topics), "partitions": count, "dirs_recorded": len(moved)}).Debug("partitions started")
	return nil
}

// recordDirsWait bounds the wait of a start for the controller to record
// the log dirs of partitions found elsewhere than the metadata names.
const recordDirsWait = 5 * time.Second

// recordDirs records in the metadata the log dirs of assignments.
func (n *Node) recordDirs(assignments []*messages.PartitionAssignment, timeout time.Duration) error {
	resp, err := actors.Request[*messages.AssignReplicaDirsResponse](context.Background(), n.system.Root, n.metadata, &messages.AssignReplicaDirsRequest{Assignments: assignments}, timeout)
	if err == nil && resp.Error != messages.ErrorCode_NONE {
		err = errors.New(resp.ErrorMessage)
	}
	if err != nil {
		return fmt.Errorf("node: recording the log dirs of partitions: %w", err)
	}
	return nil
}

// recordDirsLater records the log dirs of assignments once a second until
// the controller takes them or the node stops: a node that starts while
// no controller is reachable starts all the same.
func (n *Node) recordDirsLater(assignments []*messages.PartitionAssignment) {
	for {
		select {
		case <-n.stoppedCh:
			return
		case <-time.After(time.Second):
		}
		if err := n.recordDirs(assignments, startTimeout); err == nil {
			n.logger.WithField("partitions", len(assignments)).Info("log dirs of partitions recorded in the metadata")
			return
		}
	}
}

// replicaThrottle is the rate at which the replicas a reassignment adds to
// the node catch up, in bytes a second, 0 unlimited: the balancer's move
// throttle, whose 0 is its default and a negative value unlimited.
func replicaThrottle(b disks.BalanceSettings) int64 {
	switch {
	case b.ThrottleBytesPerS == 0:
		return disks.DefaultBalanceSettings().ThrottleBytesPerS
	case b.ThrottleBytesPerS < 0:
		return 0
	}
	return b.ThrottleBytesPerS
}

// replicaDir is the directory id of nodeID's replica of p, and whether it
// holds one.
func replicaDir(p *messages.PartitionMetadata, nodeID int32) (string, bool) {
	for _, r := range p.GetReplicaDirs() {
		if r.GetNode() == nodeID {
			return r.GetDirId(), true
		}
	}
	return "", false
}

func (n *Node) startHTTP() error {
	n.registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), newDiskCollector(n.system.Root, n.placement), newFileCacheCollector(n.files))
	if n.cfg.HTTP == "" {
		return nil
	}
	l, err := net.Listen("tcp", n.cfg.HTTP)
	if err != nil {
		return fmt.Errorf("node: cannot listen on %s for http: %w", n.cfg.HTTP, err)
	}
	n.httpAddr = l.Addr().String()
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.Handle("/metrics", promhttp.HandlerFor(n.registry, promhttp.HandlerOpts{}))
	// Go's profiles, for go tool pprof http://<http>/debug/pprof/heap.
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	n.http = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := n.http.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			n.logger.WithError(err).Error("http server stopped")
		}
	}()
	return nil
}

// bindKafka binds the Kafka listener's port, when the node has one, so
// that the node registers its address; it serves once the actors it talks
// to are up (startKafka).
func (n *Node) bindKafka() error {
	if n.cfg.KafkaListen == "" {
		return nil
	}
	l, err := net.Listen("tcp", n.cfg.KafkaListen)
	if err != nil {
		return fmt.Errorf("node: cannot listen on %s for kafka: %w", n.cfg.KafkaListen, err)
	}
	n.kafkaListener = l
	n.kafkaAddr = l.Addr().String()
	if n.cfg.KafkaAdvertised != "" {
		n.kafkaAddr = n.cfg.KafkaAdvertised
	}
	return nil
}

// startKafka serves Kafka clients on the bound port.
func (n *Node) startKafka() error {
	if n.kafkaListener == nil {
		return nil
	}
	l, err := kafka.Serve(n.system, kafka.Config{
		Listener:         n.kafkaListener,
		NodeID:           n.cfg.NodeID,
		Metadata:         n.metadata,
		PartitionManager: n.manager,
		Groups:           n.groups,
		Placement:        n.placement,
		Transport:        n.transport,
		Broker:           kafkaBrokerSettings(n.cfg, n.kafkaListener.Addr().String(), n.kafkaAddr),
		Logger:           n.logger,
	})
	if err != nil {
		return fmt.Errorf("node: %w", err)
	}
	n.kafka = l
	n.registry.MustRegister(newFetchSessionCollector(l))
	return nil
}

// kafkaBrokerSettings are cfg's settings that Kafka names as broker
// configs, for the Kafka listener's DescribeConfigs: the node listening
// for Kafka clients on listen and giving them out advertised.
func kafkaBrokerSettings(cfg Config, listen, advertised string) kafka.BrokerSettings {
	s := kafka.BrokerSettings{
		Rack: cfg.Rack, Listener: listen, Advertised: advertised,
		ReplicaLagMax: cfg.ReplicaLagMax, RetentionCheckInterval: cfg.TickInterval,
		LeaderRebalanceInterval:       cfg.Quorum.LeaderRebalanceInterval,
		OffsetsTopicPartitions:        cfg.OffsetsTopicPartitions,
		OffsetsTopicSegmentBytes:      cfg.OffsetsTopicSegmentBytes,
		OffsetsTopicReplicationFactor: controller.InternalReplicationFactor,
	}
	for _, d := range cfg.LogDirs {
		s.LogDirs = append(s.LogDirs, d.Path)
	}
	voters := make([]string, len(cfg.Controllers))
	for i, v := range cfg.Controllers {
		voters[i] = v.String()
	}
	s.Voters = strings.Join(voters, ",")
	return s
}

// KafkaAddress is the node's Kafka address as metadata gives it out (the
// advertised address, else the listener's with port 0 resolved), empty
// when it has no Kafka listener.
func (n *Node) KafkaAddress() string { return n.kafkaAddr }

// KafkaListenAddress is where the Kafka listener accepts, empty when the
// node has none.
func (n *Node) KafkaListenAddress() string {
	if n.kafkaListener == nil {
		return ""
	}
	return n.kafkaListener.Addr().String()
}

// Address is the node's actor address (host:port), with port 0 resolved.
func (n *Node) Address() string { return n.address }

// HTTPAddress is the address of /healthz, /metrics and /debug/pprof/, empty
// when disabled.
func (n *Node) HTTPAddress() string { return n.httpAddr }

// System is the node's actor system, for clients embedded in the same
// process.
func (n *Node) System() *actor.ActorSystem { return n.system }

// Transport is the remote state of the node's actor system, for clients
// embedded in the same process (see client.ActorSystem).
func (n *Node) Transport() *depotremote.Transport { return n.transport }

// Faults are the network faults injected into what the node sends to
// other nodes, for tests: none unless a test sets them (see
// depotremote.Faults).
func (n *Node) Faults() *depotremote.Faults { return n.transport.Faults() }

// OpenFiles describes the node's file cache: the segment files its
// partitions have open, and how many descriptors they hold.
func (n *Node) OpenFiles() disk.FileCacheStats { return n.files.Stats() }

// UnopenedPartitions is the number of the node's partitions whose logs
// have not opened yet since it started: 0 once every partition is
// readable without a wait (see Start).
func (n *Node) UnopenedPartitions() int { return n.partitionMetrics.Unopened() }

// Placement is the node's placement actor.
func (n *Node) Placement() *actor.PID { return n.placement }

// Metadata is the node's metadata actor.
func (n *Node) Metadata() *actor.PID { return n.metadata }

// Groups is the node's group coordinator (actors.GroupCoordinatorName).
func (n *Node) Groups() *actor.PID { return n.groups }

// Stop shuts the node down cleanly: partitions answer what they hold, sync
// and close their logs, and the log directories write their checkpoints, so
// the next start does not need to recover anything.
func (n *Node) Stop() error {
	if n.stopped {
		return nil
	}
	n.stopped = true
	defer close(n.stoppedCh)
	var errs []error
	if n.http != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = n.http.Shutdown(ctx)
		cancel()
	}
	root := n.system.Root
	if n.metadata != nil && !n.cfg.quorumOfOne() {
		// Leaderships move away before the node goes.
		res, err := root.RequestFuture(n.metadata, &controller.ControlledShutdown{Timeout: 5 * time.Second}, 6*time.Second).Result()
		if done, ok := res.(*controller.ShutdownDone); ok && done.Err != nil {
			err = done.Err
		}
		if err != nil {
			n.logger.WithError(err).Warn("controlled shutdown incomplete")
		}
	}
	// Kafka clients were told of the leaderships' new homes while the
	// listener served them; it closes before the actors it talks to.
	if n.kafka != nil {
		n.kafka.Close()
	} else if n.kafkaListener != nil {
		n.kafkaListener.Close()
	}
	if n.groups != nil {
		// Groups first: their writes go to partitions that stop below.
		_ = root.StopFuture(n.groups).Wait()
	}
	if n.metadata != nil {
		if err := root.StopFuture(n.metadata).Wait(); err != nil {
			errs = append(errs, fmt.Errorf("stopping metadata: %w", err))
		}
	}
	if n.placement != nil {
		_ = root.StopFuture(n.placement).Wait()
	}
	if n.manager != nil {
		// Every partition stops first; each sends its final report to its
		// log directory before it is gone.
		if _, err := root.RequestFuture(n.manager, &partition.StopAllPartitions{}, stopPartitionsTimeout).Result(); err != nil {
			errs = append(errs, fmt.Errorf("stopping partitions: %w", err))
		}
		if err := root.StopFuture(n.manager).Wait(); err != nil {
			errs = append(errs, fmt.Errorf("stopping the partition manager: %w", err))
		}
	}
	n.mu.Lock()
	logDirs := append([]*actor.PID(nil), n.logDirs...)
	n.mu.Unlock()
	for _, pid := range logDirs {
		res, err := root.RequestFuture(pid, &disks.WriteCheckpoints{}, startTimeout).Result()
		if err != nil {
			errs = append(errs, fmt.Errorf("checkpoint of %s: %w", pid.Id, err))
		} else if done, ok := res.(*disks.WriteCheckpointsDone); ok && done.Err != nil {
			errs = append(errs, done.Err)
		}
		_ = root.StopFuture(pid).Wait()
	}
	if n.remote != nil {
		n.remote.Shutdown(false)
	}
	n.system.Shutdown()
	n.unlock()
	if len(errs) > 0 {
		err := fmt.Errorf("node: unclean stop: %w", errors.Join(errs...))
		n.logger.WithError(err).Error("node stopped")
		return err
	}
	n.logger.Info("node stopped")
	return nil
}

// Done is closed once Stop has finished.
func (n *Node) Done() <-chan struct{} { return n.stoppedCh }

// abort releases what a failed Start took.
func (n *Node) abort() {
	if n.system != nil {
		_ = n.Stop()
		return
	}
	n.unlock()
}
