package node

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/sirupsen/logrus"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"gopkg.in/yaml.v3"

	"github.com/depot-dev/depot/actors/partition"
)

// NewCommand returns the `depot node` command, which starts a node and logs
// to stderr until SIGINT or SIGTERM stops it. Each setting comes from its
// flag, else its DEPOT_* environment variable, else the --config YAML file,
// else DefaultConfig. A malformed setting is a usage error.
func NewCommand(stderr io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "node",
		Short: "Start a node (settings from flags, DEPOT_* environment variables, then --config YAML)",
		Args:  cobra.NoArgs,
	}
	f := newCommandFlags(cmd.Flags())
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		cfg, err := f.config()
		if err != nil {
			return err
		}
		logger := logrus.New()
		logger.SetOutput(stderr)
		if level, err := logrus.ParseLevel(cfg.LogLevel); err == nil {
			logger.SetLevel(level)
		}
		cfg.Logger = logger
		// Signals are caught from here on, so that one that arrives
		// during start-up stops the node cleanly once it has started.
		ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		n, err := Start(cfg)
		if err != nil {
			return err
		}
		// A node of a cluster serves while it joins; one the cluster
		// refuses stops with the reason.
		refused := make(chan error, 1)
		go func() {
			if err := n.WaitRegistered(ctx); err != nil && ctx.Err() == nil {
				refused <- err
			}
		}()
		select {
		case <-ctx.Done():
			logger.Info("shutting down")
			return n.Stop()
		case err := <-refused:
			_ = n.Stop()
			return err
		}
	}
	return cmd
}

// commandFlags are the settings of `depot node` as its flags hold them.
// Each flag's default is DefaultConfig's.
type commandFlags struct {
	flags      *pflag.FlagSet
	cfg        Config
	configFile string
	logDirs    string
	throttle   string
	reserve    string
	voters     string
}

func newCommandFlags(flags *pflag.FlagSet) *commandFlags {
	d := DefaultConfig()
	f := &commandFlags{flags: flags, cfg: d}
	flags.StringVar(&f.configFile, "config", "", "YAML file of settings, keyed by flag name (env DEPOT_CONFIG)")
	flags.Int32Var(&f.cfg.NodeID, "node-id", d.NodeID, "this node's id in the cluster")
	flags.StringVar(&f.cfg.DataDir, "data-dir", d.DataDir, "directory for the metadata log and, by default, two log directories")
	flags.StringVar(&f.logDirs, "log-dirs", "", "comma-separated log directories, each PATH or PATH=CAPACITY (default: DATA-DIR/logs-0,DATA-DIR/logs-1)")
	flags.StringVar(&f.cfg.Listen, "listen", d.Listen, "actor address clients and nodes connect to")
	flags.StringVar(&f.cfg.HTTP, "http", d.HTTP, "address of /healthz, /metrics and /debug/pprof/ (empty disables)")
	flags.StringVar(&f.cfg.KafkaListen, "kafka-listen", d.KafkaListen, "address of the Kafka protocol listener, for Kafka clients and tools (empty disables)")
	flags.StringVar(&f.cfg.KafkaAdvertised, "kafka-advertised", "", "Kafka address given out in metadata, when clients reach the node by another than --kafka-listen (default: --kafka-listen)")
	flags.StringVar(&f.cfg.LogLevel, "log-level", d.LogLevel, "log level: error, warn, info, debug")
	flags.StringVar(&f.cfg.Policy, "placement-policy", d.Policy, "where new partitions go: load (projected bytes against capacity, spread per topic) or count (Kafka's rule)")
	flags.DurationVar(&f.cfg.Balance.Interval, "balance-interval", d.Balance.Interval, "how often the balancer plans moves between log dirs (negative: only on request)")
	flags.Float64Var(&f.cfg.Balance.MaxDeviation, "balance-max-deviation", d.Balance.MaxDeviation, "keep every log dir's used fraction within this fraction of the node's mean")
	flags.Float64Var(&f.cfg.Balance.HighWater, "balance-high-water", d.Balance.HighWater, "keep every log dir below this fraction of its capacity")
	flags.StringVar(&f.throttle, "move-throttle", formatBytes(d.Balance.ThrottleBytesPerS), "copy rate of a partition move between log dirs, and fetch rate of the replicas a reassignment adds here until they are in sync, per second (0: unlimited)")
	flags.StringVar(&f.voters, "controllers", "", "voters of the controller quorum, ID@HOST:PORT,... as Kafka's controller.quorum.voters (default: this node alone)")
	flags.StringVar(&f.cfg.Rack, "rack", "", "this node's rack, for rack-aware replica placement")
	flags.DurationVar(&f.cfg.GroupInitialRebalanceDelay, "group-initial-rebalance-delay", d.GroupInitialRebalanceDelay, "how long the first rebalance of an empty Kafka consumer group waits for more members (Kafka's group.initial.rebalance.delay.ms)")
	flags.DurationVar(&f.cfg.ReplicaFetchLinger, "replica-fetch-linger", 0, "how long a follower's parked fetch that an append wakes waits for more appends, when the leader answered it less than that long ago: fewer rounds between the nodes at low rates, later acks=all answers (0: at once)")
	flags.DurationVar(&f.cfg.ReplicaLagMax, "replica-lag-max", partition.DefaultReplicaLagMax, "a follower that has not caught up with its leader for this long leaves the ISR (Kafka's replica.lag.time.max.ms)")
	flags.DurationVar(&f.cfg.Quorum.LeaderRebalanceInterval, "leader-rebalance-interval", d.Quorum.LeaderRebalanceInterval, "how often preferred replicas become leaders again where they can (Kafka's auto.leader.rebalance.enable); negative: never")
	flags.Uint64Var(&f.cfg.Quorum.SnapshotEvery, "metadata-snapshot-every", d.Quorum.SnapshotEvery, "metadata log entries applied between snapshots; each snapshot compacts the log, and a node that was away long catches up from one")
	flags.Int64Var(&f.cfg.KeepWrittenBytes, "keep-written-bytes", d.KeepWrittenBytes, "bytes of the node's newest log writes left in the OS page cache for readers at the tail; older written bytes are dropped from it once written back (-1: no bound, the kernel keeps every written page until memory runs short)")
	flags.IntVar(&f.cfg.MaxOpenFiles, "max-open-files", d.MaxOpenFiles, "most descriptors the node's partition logs hold open at once, whatever its partition count: segment files least recently used are closed and reopened on use (default: the process's open-file limit less 4096, or half of it when it is lower)")
	flags.IntVar(&f.cfg.SyncfsPartitions, "syncfs-partitions", d.SyncfsPartitions, "a log dir's group commit of at least this many partitions syncs its whole file system at once (syncfs) rather than each partition's file; 0: never, for log dirs on a file system that other heavy writers share")
	flags.StringVar(&f.reserve, "disk-reserve", "", "free space each log dir keeps: under it the dir is full, refusing appends while reads go on; bytes or a percentage of capacity (default: the smaller of 5% and 5GiB)")
	return f
}

// config fills the flags not given on the command line from the environment
// and the config file, then returns the Config they make.
func (f *commandFlags) config() (Config, error) {
	if err := applySettings(f.flags, f.configFile); err != nil {
		return Config{}, MarkUsage(err)
	}
	cfg := f.cfg
	if cfg.NodeID <= 0 {
		return Config{}, Usagef("--node-id %d: node ids start at 1 (0 is raft's \"no node\")", cfg.NodeID)
	}
	if f.voters != "" {
		voters, err := ParseVoters(f.voters)
		if err != nil {
			return Config{}, Usagef("--controllers: %v", err)
		}
		cfg.Controllers = voters
	}
	if f.throttle != "" {
		n, err := ParseBytes(f.throttle)
		if err != nil {
			return Config{}, Usagef("--move-throttle: %v", err)
		}
		cfg.Balance.ThrottleBytesPerS = n
		if n == 0 {
			cfg.Balance.ThrottleBytesPerS = -1
		}
	}
	if cfg.SyncfsPartitions <= 0 {
		cfg.SyncfsPartitions = -1
	}
	if f.reserve != "" {
		r, err := ParseReserve(f.reserve)
		if err != nil {
			return Config{}, Usagef("--disk-reserve: %v", err)
		}
		cfg.DiskReserve = r
	}
	if f.logDirs != "" {
		dirs, err := ParseLogDirs(f.logDirs)
		if err != nil {
			return Config{}, Usagef("--log-dirs: %v", err)
		}
		cfg.LogDirs = dirs
	}
	return cfg, nil
}

// applySettings fills every flag not given on the command line from its
// DEPOT_* environment variable (--data-dir: DEPOT_DATA_DIR), then from the
// YAML config file, whose keys are the flag names.
func applySettings(flags *pflag.FlagSet, configFile string) error {
	if configFile == "" {
		configFile = os.Getenv("DEPOT_CONFIG")
	}
	fileValues := map[string]any{}
	if configFile != "" {
		data, err := os.ReadFile(configFile)
		if err != nil {
			return fmt.Errorf("config file: %w", err)
		}
		if err := yaml.Unmarshal(data, &fileValues); err != nil {
			return fmt.Errorf("config file %s: %w", configFile, err)
		}
		for key := range fileValues {
			if flags.Lookup(key) == nil || key == "config" {
				return fmt.Errorf("config file %s: unknown setting %q", configFile, key)
			}
		}
	}
	var errs []error
	flags.VisitAll(func(f *pflag.Flag) {
		if f.Changed || f.Name == "config" {
			return
		}
		env := "DEPOT_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v, ok := os.LookupEnv(env); ok {
			if err := f.Value.Set(v); err != nil {
				errs = append(errs, fmt.Errorf("%s=%q: %w", env, v, err))
			}
			return
		}
		if v, ok := fileValues[f.Name]; ok {
			text := fmt.Sprint(v)
			if list, ok := v.([]any); ok {
				parts := make([]string, len(list))
				for i, item := range list {
					parts[i] = fmt.Sprint(item)
				}
				text = strings.Join(parts, ",")
			}
			if err := f.Value.Set(text); err != nil {
				errs = append(errs, fmt.Errorf("config file %s: %s: %q: %w", configFile, f.Name, text, err))
			}
		}
	})
	return errors.Join(errs...)
}
