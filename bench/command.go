package bench

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"strings"
	"syscall"

	"github.com/sirupsen/logrus"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/depot-dev/depot/actors/client"
	"github.com/depot-dev/depot/node"
	"github.com/depot-dev/depot/wire"
)

// EnvBrokers is the environment variable every depot command, bench
// included, takes its node addresses from when --brokers is not given.
const EnvBrokers = "DEPOT_BROKERS"

// NewCommand returns the `depot bench` command, writing its report to stdout
// and its progress bar (on a terminal only) and logs to stderr. It reads
// DEPOT_BROKERS from the process's environment. SIGINT or SIGTERM ends the
// run early; what was measured is still printed.
func NewCommand(stdout, stderr io.Writer) *cobra.Command {
	return newCommand(stdout, stderr, os.LookupEnv)
}

// newCommand is NewCommand reading the environment through lookupEnv.
func newCommand(stdout, stderr io.Writer, lookupEnv func(string) (string, bool)) *cobra.Command {
	var (
		cfg         Config
		brokers     string
		embedded    bool
		acks        string
		compression string
		workload    string
		output      string
		plotPath    string
		cpuProfile  string
		memProfile  string
		tracePath   string
	)
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure produce and consume throughput and latency",
		Long: `Measure produce and consume throughput and latency of running nodes or of a
node embedded in this process.

What is measured: the nodes --brokers names; else the nodes DEPOT_BROKERS
names, as for every depot command; else, or with --embedded, a node embedded
in this process (data in a temporary directory under --dir, removed at the
end unless --keep). --embedded with --brokers or DEPOT_BROKERS set is an
error. On running nodes the topic is created and deleted at the end unless
--keep.

Production ends at --records (default 1000000) or --duration (default 60s),
whichever comes first; with --duration given and --records not, it ends at
--duration. Every phase is bounded in time.

Workloads: produce; consume (produce, then re-read everything from the start);
both (the default: consumers tail the topic while producing, giving end-to-end
latency, then a catch-up read). MB is 10^6 bytes of record values. Cores is
the CPU time this process used while a row was measured over its wall time:
the client's, and the embedded node's when there is one.`,
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) (err error) {
			defer func() {
				// A configuration that cannot run is a malformed command line.
				if errors.Is(err, ErrConfig) {
					err = node.MarkUsage(err)
				}
			}()
			env, envSet := lookupEnv(EnvBrokers)
			if cfg.Brokers, err = resolveBrokers(brokers, cmd.Flags().Changed("brokers"), env, envSet, embedded); err != nil {
				return err
			}
			if cfg.Acks, err = client.ParseAcks(acks); err != nil {
				return fmt.Errorf("%w: acks %q: want 0, 1, -1 or all (all is -1)", ErrConfig, acks)
			}
			cfg.AcksSet = true
			if err := countAndTime(cmd, &cfg); err != nil {
				return err
			}
			if cfg.Compression, err = wire.ParseCompression(compression); err != nil {
				return fmt.Errorf("%w: %w", ErrConfig, err)
			}
			cfg.Workload = Workload(workload)
			if output != "text" && output != "json" {
				return fmt.Errorf("%w: -o %q: want text or json", ErrConfig, output)
			}
			logger := logrus.New()
			logger.SetOutput(stderr)
			logger.SetLevel(logrus.WarnLevel)
			cfg.Logger = logger
			if isTerminal(stderr) {
				cfg.Progress = stderr
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			go func() {
				<-ctx.Done()
				stop() // a second Ctrl-C kills the process
			}()
			if cpuProfile != "" {
				f, err := os.Create(cpuProfile)
				if err != nil {
					return fmt.Errorf("%w: --cpuprofile: %w", ErrConfig, err)
				}
				defer f.Close()
				if err := pprof.StartCPUProfile(f); err != nil {
					return fmt.Errorf("--cpuprofile: %w", err)
				}
				defer pprof.StopCPUProfile()
			}
			if tracePath != "" {
				f, err := os.Create(tracePath)
				if err != nil {
					return fmt.Errorf("%w: --trace: %w", ErrConfig, err)
				}
				defer f.Close()
				if err := trace.Start(f); err != nil {
					return fmt.Errorf("--trace: %w", err)
				}
				defer trace.Stop()
			}

			rep, err := Run(ctx, cfg)
			if err != nil {
				return err
			}
			if memProfile != "" {
				if err := writeAllocs(memProfile); err != nil {
					return err
				}
			}
			if output == "json" {
				err = rep.WriteJSON(stdout)
			} else {
				err = rep.WriteText(stdout)
			}
			if err != nil {
				return err
			}
			if plotPath != "" {
				if err := WritePlot(rep, plotPath); err != nil {
					return err
				}
			}
			return nil
		},
	}
	cmd.SetOut(stdout)
	cmd.SetErr(stderr)
	f := cmd.Flags()
	f.StringVar(&brokers, "brokers", "", "comma-separated node addresses to benchmark (env DEPOT_BROKERS; with neither, an embedded node)")
	f.BoolVar(&embedded, "embedded", false, "benchmark a node embedded in this process (the default when neither --brokers nor DEPOT_BROKERS is set)")
	f.StringVar(&cfg.Topic, "topic", "", "topic to produce to, created if missing (default depot-bench-<random>)")
	f.BoolVar(&cfg.Keep, "keep", false, "keep the topic (with --brokers) or the embedded node's data at the end")
	f.StringVar(&cfg.Dir, "dir", "", "directory for the embedded node's data and the baseline file (default the system temporary directory)")
	f.IntVar(&cfg.RecordSize, "record-size", DefaultRecordSize, "bytes per record value, at least 8")
	f.Int64Var(&cfg.Records, "records", DefaultRecords, "records to produce across producers; with --duration given and --records not, no record bound (the run ends by time)")
	f.DurationVar(&cfg.Duration, "duration", DefaultDuration, "time bound of production (and of the catch-up read); with --records too, whichever ends first")
	f.IntVar(&cfg.Partitions, "partitions", 1, "partitions of the topic")
	f.IntVarP(&cfg.ReplicationFactor, "replication-factor", "r", 0, "replicas of each partition of a topic the run creates (default: the cluster's, 1)")
	f.IntVar(&cfg.Producers, "producers", 1, "producers, each with its own batching")
	f.IntVar(&cfg.Consumers, "consumers", 1, "consumers; partition p goes to consumer p mod consumers")
	f.StringVar(&acks, "acks", "1", "acknowledgement: 0 (none waited for), 1 (leader wrote), -1 or all (every in-sync replica, after fsync)")
	f.StringVar(&compression, "compression", "none", "compression: none, gzip, snappy, lz4, zstd")
	f.IntVar(&cfg.Keys, "keys", 0, "distinct keys, used in turn (0: null keys)")
	f.Float64Var(&cfg.Rate, "rate", 0, "target records/s across producers (0: unthrottled)")
	f.DurationVar(&cfg.Warmup, "warmup", 0, "leave the first part of production out of the produce and end-to-end figures (steady state only)")
	f.DurationVar(&cfg.Linger, "linger", 0, "producer linger (default the client's, 5ms)")
	f.IntVar(&cfg.BatchBytes, "batch-bytes", 0, "producer batch size in bytes (default the client's, 1 MiB)")
	f.Int64Var(&cfg.MaxBufferedBytes, "buffer-bytes", 0, "each producer's bound on bytes produced and not yet acknowledged, as Kafka's buffer.memory (default 16 MiB and 2 KiB a partition written to, up to 64 MiB)")
	f.StringVar(&workload, "workload", string(WorkloadBoth), "produce, consume or both")
	f.StringVarP(&output, "output", "o", "text", "output format: text or json (one object per line)")
	f.StringVar(&plotPath, "plot", "", "write throughput over time and latency percentiles to this PNG file")
	f.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run (client and embedded node) to this file, for go tool pprof")
	f.StringVar(&memProfile, "memprofile", "", "write an allocation profile of the whole run to this file at its end, for go tool pprof")
	f.StringVar(&tracePath, "trace", "", "write an execution trace of the whole run to this file, for go tool trace")
	f.BoolVar(&cfg.Baseline, "baseline", false, "first measure file write, read, group commit, the latency of paced writes and loopback TCP, and give ratios to them")
	f.DurationVar(&cfg.BaselineDuration, "baseline-duration", DefaultBaselineDuration, "duration of the paced write and of the loopback measurement (the other file passes are bounded by 5 times it)")
	return cmd
}

// countAndTime sets cfg's bounds from --records and --duration: a flag left
// out leaves its field zero, for Config's defaults (--duration alone runs
// for that long, without a record bound); a flag given must be positive.
func countAndTime(cmd *cobra.Command, cfg *Config) error {
	f := cmd.Flags()
	switch {
	case !f.Changed("records"):
		cfg.Records = 0
	case cfg.Records <= 0:
		return fmt.Errorf("%w: --records %d: want at least 1 (to run by time, give --duration and leave out --records)", ErrConfig, cfg.Records)
	}
	switch {
	case !f.Changed("duration"):
		cfg.Duration = 0
	case cfg.Duration <= 0:
		return fmt.Errorf("%w: --duration %s: want more than 0", ErrConfig, cfg.Duration)
	}
	return nil
}

// resolveBrokers decides what a run benchmarks from --brokers (flag, and
// whether it was given), DEPOT_BROKERS (env, and whether it is set) and
// --embedded: the addresses of --brokers, else those of DEPOT_BROKERS, else
// none, meaning a node embedded in the process. As for the other depot
// commands, a DEPOT_BROKERS that is set counts even when empty. --embedded
// with either of the others is an error, and so is a list that names no
// address; both wrap ErrConfig.
func resolveBrokers(flag string, flagSet bool, env string, envSet, embedded bool) ([]string, error) {
	switch {
	case embedded && flagSet:
		return nil, fmt.Errorf("%w: --embedded and --brokers %q: give one of them", ErrConfig, flag)
	case embedded && envSet:
		return nil, fmt.Errorf("%w: --embedded, but %s=%q names nodes to benchmark: unset it, or leave out --embedded", ErrConfig, EnvBrokers, env)
	case flagSet:
		return splitBrokers("--brokers", flag)
	case envSet:
		return splitBrokers(EnvBrokers, env)
	}
	return nil, nil
}

// splitBrokers splits a comma-separated address list given by source.
func splitBrokers(source, list string) ([]string, error) {
	var brokers []string
	for _, b := range strings.Split(list, ",") {
		if b = strings.TrimSpace(b); b != "" {
			brokers = append(brokers, b)
		}
	}
	if len(brokers) == 0 {
		return nil, fmt.Errorf("%w: %s %q names no address", ErrConfig, source, list)
	}
	return brokers, nil
}

// writeAllocs writes the allocation profile (every allocation since the
// process started, sampled) to path. The profile stops at the last
// completed garbage collection, so one runs first: without it, what was
// allocated since (seconds of a run) would be missing.
func writeAllocs(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("%w: --memprofile: %w", ErrConfig, err)
	}
	runtime.GC()
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		f.Close()
		return fmt.Errorf("--memprofile: %w", err)
	}
	return f.Close()
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
