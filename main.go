// Command depot runs a Depot node and talks to one: topics, produce,
// consume, consumer groups.
//
//	depot node                         start a node on ./data, 127.0.0.1:7070
//	depot topic create NAME -p 3       create a topic
//	depot produce NAME < lines.txt     one record per line
//	depot consume NAME -n 10           read records back
//	depot consume NAME -g GROUP        read as a member of a consumer group
//	depot group describe GROUP         members, committed offsets, lag
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/spf13/cobra"

	"github.com/depot-dev/depot/actors/client"
	"github.com/depot-dev/depot/bench"
	"github.com/depot-dev/depot/internal/usage"
	"github.com/depot-dev/depot/messages"
	"github.com/depot-dev/depot/node"
	"github.com/depot-dev/depot/wire"
)

// exitUsage is the exit status for a malformed command line.
const exitUsage = 2

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run executes the depot command with args and returns its exit status.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := newRootCommand(stdin, stdout, stderr)
	root.SetArgs(args)
	cmd, err := root.ExecuteC()
	if err == nil {
		return 0
	}
	fmt.Fprintf(stderr, "depot: %v\n", oneLine(err))
	if usage.Is(err) || cmd == root || isFlagError(err) {
		return exitUsage
	}
	return 1
}

func isFlagError(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "flag") || strings.Contains(msg, "unknown command") || strings.Contains(msg, "arg(s)")
}

// oneLine keeps an error to one line for the terminal.
func oneLine(err error) string {
	return strings.ReplaceAll(strings.TrimSpace(err.Error()), "\n", "; ")
}

// globals are the flags every client command takes.
type globals struct {
	brokers string
	output  string
	timeout time.Duration
	stdin   io.Reader
	stdout  io.Writer
	stderr  io.Writer
}

func newRootCommand(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	g := &globals{stdin: stdin, stdout: stdout, stderr: stderr}
	root := &cobra.Command{
		Use:           "depot",
		Short:         "Depot: a distributed commit log in the model of Kafka",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.PersistentFlags().StringVar(&g.brokers, "brokers", envOr("DEPOT_BROKERS", node.DefaultListen), "comma-separated node addresses to contact (env DEPOT_BROKERS)")
	root.PersistentFlags().StringVarP(&g.output, "output", "o", "text", "output format: text or json")
	root.PersistentFlags().DurationVar(&g.timeout, "timeout", 30*time.Second, "how long to wait for a node's answer")
	root.AddCommand(newTopicCommand(g), newProduceCommand(g), newConsumeCommand(g), newGroupCommand(g), newDisksCommand(g), node.NewCommand(stderr), bench.NewCommand(stdout, stderr))
	return root
}

func envOr(name, fallback string) string {
	if v, ok := os.LookupEnv(name); ok {
		return v
	}
	return fallback
}

// client connects to the brokers named by --brokers.
func (g *globals) client() (*client.Client, error) {
	if g.output != "text" && g.output != "json" {
		return nil, usage.Errorf("-o %q: want text or json", g.output)
	}
	logger := logrus.New()
	logger.SetOutput(g.stderr)
	logger.SetLevel(logrus.ErrorLevel)
	var brokers []string
	for _, b := range strings.Split(g.brokers, ",") {
		if b = strings.TrimSpace(b); b != "" {
			brokers = append(brokers, b)
		}
	}
	if len(brokers) == 0 {
		return nil, usage.Errorf("--brokers names no address")
	}
	return client.New(client.Brokers(brokers...), client.RequestTimeout(g.timeout), client.Logger(logrus.NewEntry(logger)))
}

func (g *globals) printJSON(v any) error {
	enc := json.NewEncoder(g.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// signalContext is cancelled by SIGINT or SIGTERM.
func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

// ---- depot topic ----

func newTopicCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "topic", Short: "Create, list, describe and delete topics"}
	cmd.AddCommand(newTopicCreateCommand(g), newTopicListCommand(g), newTopicDescribeCommand(g), newTopicDeleteCommand(g))
	return cmd
}

func newTopicCreateCommand(g *globals) *cobra.Command {
	var (
		partitions int32
		configs    []string
	)
	cmd := &cobra.Command{
		Use:   "create NAME...",
		Short: "Create topics",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg := map[string]string{}
			for _, kv := range configs {
				k, v, ok := strings.Cut(kv, "=")
				if !ok || k == "" {
					return usage.Errorf("-c %q: want key=value", kv)
				}
				cfg[k] = v
			}
			if partitions < 1 {
				return usage.Errorf("-p %d: a topic needs at least one partition", partitions)
			}
			return g.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				for _, name := range args {
					md, err := c.CreateTopic(ctx, name, partitions, cfg)
					if err != nil {
						return fmt.Errorf("create topic %s: %w", name, err)
					}
					if g.output == "json" {
						if err := g.printJSON(map[string]any{"topic": md.Name, "partitions": len(md.Partitions)}); err != nil {
							return err
						}
						continue
					}
					fmt.Fprintf(g.stdout, "created topic %s with %d partitions\n", md.Name, len(md.Partitions))
				}
				return nil
			})
		},
	}
	cmd.Flags().Int32VarP(&partitions, "partitions", "p", 1, "number of partitions")
	cmd.Flags().StringArrayVarP(&configs, "config", "c", nil, "topic config key=value (Kafka's names: retention.ms, segment.bytes, ...); repeatable")
	return cmd
}

func newTopicListCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List topics",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				md, err := c.Metadata(ctx)
				if err != nil {
					return err
				}
				sort.Slice(md.Topics, func(i, j int) bool { return md.Topics[i].Name < md.Topics[j].Name })
				type row struct {
					Name       string `json:"name"`
					Partitions int    `json:"partitions"`
					Internal   bool   `json:"internal"`
				}
				rows := []row{}
				for _, t := range md.Topics {
					rows = append(rows, row{Name: t.Name, Partitions: len(t.Partitions), Internal: t.Internal})
				}
				if g.output == "json" {
					return g.printJSON(rows)
				}
				w := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(w, "NAME\tPARTITIONS")
				for _, r := range rows {
					fmt.Fprintf(w, "%s\t%d\n", r.Name, r.Partitions)
				}
				return w.Flush()
			})
		},
	}
}

// partitionDescription is one partition in `depot topic describe`.
type partitionDescription struct {
	Partition      int32  `json:"partition"`
	Leader         int32  `json:"leader"`
	LogDir         string `json:"log_dir"`
	LogStartOffset int64  `json:"log_start_offset"`
	LogEndOffset   int64  `json:"log_end_offset"`
	Bytes          int64  `json:"bytes"`
	Segments       int32  `json:"segments"`
	Error          string `json:"error,omitempty"`
}

func newTopicDescribeCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "describe NAME",
		Short: "Show a topic's configs and, per partition, its log dir, offsets and bytes",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				md, err := c.Metadata(ctx, args[0])
				if err != nil {
					return err
				}
				if len(md.Topics) != 1 || md.Topics[0].Error != messages.ErrorCode_NONE {
					return fmt.Errorf("unknown topic %s", args[0])
				}
				t := md.Topics[0]
				parts := make([]partitionDescription, 0, len(t.Partitions))
				for _, p := range t.Partitions {
					d := partitionDescription{Partition: p.Partition, Leader: p.Leader, LogDir: p.LogDir}
					st, err := c.PartitionStatus(ctx, t.Name, p.Partition)
					if err != nil {
						d.Error = err.Error()
					} else {
						d.LogDir, d.LogStartOffset, d.LogEndOffset, d.Bytes, d.Segments = st.LogDir, st.LogStartOffset, st.LogEndOffset, st.SizeBytes, st.Segments
					}
					parts = append(parts, d)
				}
				sort.Slice(parts, func(i, j int) bool { return parts[i].Partition < parts[j].Partition })
				if g.output == "json" {
					return g.printJSON(map[string]any{"name": t.Name, "internal": t.Internal, "configs": t.Configs, "partitions": parts})
				}
				fmt.Fprintf(g.stdout, "NAME        %s\nPARTITIONS  %d\n", t.Name, len(parts))
				keys := make([]string, 0, len(t.Configs))
				for k := range t.Configs {
					keys = append(keys, k)
				}
				sort.Strings(keys)
				fmt.Fprintln(g.stdout, "\nCONFIGS")
				w := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
				for _, k := range keys {
					fmt.Fprintf(w, "%s\t%s\n", k, t.Configs[k])
				}
				w.Flush()
				fmt.Fprintln(g.stdout, "\nPARTITIONS")
				w = tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(w, "PARTITION\tLEADER\tLOG-DIR\tLOG-START\tLOG-END\tBYTES\tSEGMENTS")
				for _, p := range parts {
					if p.Error != "" {
						fmt.Fprintf(w, "%d\t%d\t%s\t-\t-\t-\t-\t%s\n", p.Partition, p.Leader, p.LogDir, p.Error)
						continue
					}
					fmt.Fprintf(w, "%d\t%d\t%s\t%d\t%d\t%d\t%d\n", p.Partition, p.Leader, p.LogDir, p.LogStartOffset, p.LogEndOffset, p.Bytes, p.Segments)
				}
				return w.Flush()
			})
		},
	}
}

func newTopicDeleteCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "delete NAME...",
		Short: "Delete topics and their data",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				for _, name := range args {
					if err := c.DeleteTopic(ctx, name); err != nil {
						return fmt.Errorf("delete topic %s: %w", name, err)
					}
					fmt.Fprintf(g.stdout, "deleted topic %s\n", name)
				}
				return nil
			})
		},
	}
}

// ---- depot produce ----

func newProduceCommand(g *globals) *cobra.Command {
	var (
		keySeparator string
		acks         int
		compression  string
		partition    int32
		maxLine      int
	)
	cmd := &cobra.Command{
		Use:   "produce TOPIC",
		Short: "Produce one record per line of standard input",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			topic := args[0]
			if acks != 0 && acks != 1 && acks != -1 {
				return usage.Errorf("--acks %d: want 0, 1 or -1 (all)", acks)
			}
			codec, err := wire.ParseCompression(compression)
			if err != nil {
				return usage.Wrap(err)
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			defer c.Close()
			ctx, stop := signalContext()
			defer stop()
			if _, err := c.Metadata(ctx, topic); err != nil {
				return err
			}
			opts := []client.ProducerOpt{client.Acks(acks), client.Compression(codec)}
			if partition >= 0 {
				opts = append(opts, client.WithPartitioner(client.ManualPartitioner()))
			}
			p, err := c.NewProducer(opts...)
			if err != nil {
				return err
			}
			defer p.Close()
			started := time.Now()
			var produced, failed, bytes int64
			var firstErr error
			errCh := make(chan error, 1)
			scanner := bufio.NewScanner(g.stdin)
			scanner.Buffer(make([]byte, 64<<10), maxLine)
			for scanner.Scan() {
				line := scanner.Bytes()
				r := &client.Record{Topic: topic, Partition: partition}
				if keySeparator != "" {
					if k, v, ok := strings.Cut(string(line), keySeparator); ok {
						r.Key, r.Value = []byte(k), []byte(v)
					} else {
						r.Value = append([]byte(nil), line...)
					}
				} else {
					r.Value = append([]byte(nil), line...)
				}
				bytes += int64(len(r.Key) + len(r.Value))
				p.Produce(ctx, r, func(_ *client.Record, err error) {
					if err != nil {
						select {
						case errCh <- err:
						default:
						}
					}
				})
				produced++
				select {
				case firstErr = <-errCh:
				default:
				}
				if firstErr != nil {
					break
				}
			}
			if err := scanner.Err(); err != nil && firstErr == nil {
				if errors.Is(err, bufio.ErrTooLong) {
					firstErr = fmt.Errorf("a line is longer than --max-line %d bytes", maxLine)
				} else {
					firstErr = fmt.Errorf("reading standard input: %w", err)
				}
			}
			if err := p.Flush(ctx); err != nil && firstErr == nil {
				firstErr = err
			}
			select {
			case err := <-errCh:
				if firstErr == nil {
					firstErr = err
				}
				failed++
			default:
			}
			elapsed := time.Since(started)
			if firstErr != nil {
				return fmt.Errorf("produce to %s: %w", topic, firstErr)
			}
			fmt.Fprintf(g.stderr, "produced %d records (%d bytes) to %s in %v (%.0f records/s), acks=%d\n",
				produced-failed, bytes, topic, elapsed.Round(time.Millisecond), float64(produced)/elapsed.Seconds(), acks)
			return nil
		},
	}
	cmd.Flags().StringVarP(&keySeparator, "key-separator", "k", "", "split each line into key and value at the first occurrence of this string")
	cmd.Flags().IntVar(&acks, "acks", -1, "acknowledgement: 0 (none), 1 (leader wrote), -1 (all, after fsync)")
	cmd.Flags().StringVarP(&compression, "compression", "z", "none", "compression: none, gzip, snappy, lz4, zstd")
	cmd.Flags().Int32VarP(&partition, "partition", "p", -1, "produce to this partition (default: by key hash, sticky without a key)")
	cmd.Flags().IntVar(&maxLine, "max-line", 1<<20, "longest line accepted, in bytes")
	return cmd
}

// ---- depot consume ----

func newConsumeCommand(g *globals) *cobra.Command {
	var (
		offset     string
		count      int
		format     string
		partitions []int32
		group      string
	)
	cmd := &cobra.Command{
		Use:   "consume TOPIC",
		Short: "Print a topic's records, one per line (with -g, as a member of a consumer group)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			topic := args[0]
			if count < 0 {
				return usage.Errorf("-n %d: want a positive count, or 0 for no limit", count)
			}
			if cmd.Flags().Changed("group") {
				return consumeGroup(g, topic, group, offset, count, format, partitions)
			}
			at, err := parseOffset(offset)
			if err != nil {
				return usage.Wrap(err)
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			defer c.Close()
			ctx, stop := signalContext()
			defer stop()
			md, err := c.Metadata(ctx, topic)
			if err != nil {
				return err
			}
			if len(md.Topics) != 1 || md.Topics[0].Error != messages.ErrorCode_NONE {
				return fmt.Errorf("unknown topic %s", topic)
			}
			consumer, err := c.NewConsumer()
			if err != nil {
				return err
			}
			defer consumer.Close()
			if len(partitions) == 0 {
				consumer.AssignTopic(topic, at)
			} else {
				n := int32(len(md.Topics[0].Partitions))
				for _, p := range partitions {
					if p < 0 || p >= n {
						return usage.Errorf("-p %d: topic %s has partitions 0 to %d", p, topic, n-1)
					}
					consumer.Assign(topic, p, at)
				}
			}
			out := bufio.NewWriter(g.stdout)
			defer out.Flush()
			printed := 0
			var line []byte
			for count == 0 || printed < count {
				records, err := consumer.Poll(ctx)
				if err != nil {
					if ctx.Err() != nil {
						return nil
					}
					return err
				}
				for _, r := range records {
					line = formatRecord(line[:0], format, r)
					out.Write(line)
					printed++
					if count > 0 && printed >= count {
						break
					}
				}
				if err := out.Flush(); err != nil {
					return err
				}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&offset, "offset", "start", "where to start: start, end, an offset, or @UNIX_MS for a timestamp")
	cmd.Flags().IntVarP(&count, "num", "n", 0, "stop after this many records (0: run until interrupted)")
	cmd.Flags().StringVarP(&format, "format", "f", "%v\\n", "output format: %v value, %k key, %p partition, %o offset, %t topic, %d timestamp (ms), %h headers; \\n, \\t")
	cmd.Flags().Int32SliceVarP(&partitions, "partitions", "p", nil, "only these partitions (default: all)")
	cmd.Flags().StringVarP(&group, "group", "g", "", "consume as a member of this consumer group: the group assigns partitions, and printed records are committed; --offset (start or end) is where partitions with no committed offset start")
	return cmd
}

func parseOffset(s string) (client.Offset, error) {
	switch {
	case s == "start" || s == "earliest":
		return client.AtStart(), nil
	case s == "end" || s == "latest":
		return client.AtEnd(), nil
	case strings.HasPrefix(s, "@"):
		ms, err := strconv.ParseInt(s[1:], 10, 64)
		if err != nil || ms < 0 {
			return client.Offset{}, fmt.Errorf("--offset %q: want @ and a Unix time in milliseconds", s)
		}
		return client.AtTimestamp(time.UnixMilli(ms)), nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return client.Offset{}, fmt.Errorf("--offset %q: want start, end, a non-negative offset or @UNIX_MS", s)
	}
	return client.AtOffset(n), nil
}

// formatRecord appends r to dst as format says (rpk's verbs).
func formatRecord(dst []byte, format string, r *client.Record) []byte {
	for i := 0; i < len(format); i++ {
		c := format[i]
		if (c != '%' && c != '\\') || i+1 == len(format) {
			dst = append(dst, c)
			continue
		}
		i++
		switch v := format[i]; {
		case c == '\\' && v == 'n':
			dst = append(dst, '\n')
		case c == '\\' && v == 't':
			dst = append(dst, '\t')
		case c == '\\':
			dst = append(dst, '\\', v)
		case v == 'v':
			dst = append(dst, r.Value...)
		case v == 'k':
			dst = append(dst, r.Key...)
		case v == 'p':
			dst = strconv.AppendInt(dst, int64(r.Partition), 10)
		case v == 'o':
			dst = strconv.AppendInt(dst, r.Offset, 10)
		case v == 't':
			dst = append(dst, r.Topic...)
		case v == 'd':
			dst = strconv.AppendInt(dst, r.Timestamp.UnixMilli(), 10)
		case v == 'h':
			for j, h := range r.Headers {
				if j > 0 {
					dst = append(dst, ',')
				}
				dst = append(dst, h.Key...)
				dst = append(dst, '=')
				dst = append(dst, h.Value...)
			}
		case v == '%':
			dst = append(dst, '%')
		default:
			dst = append(dst, '%', v)
		}
	}
	return dst
}

// ---- depot disks ----

// diskRow is one log directory in `depot disks -o json`.
type diskRow struct {
	Path           string  `json:"path"`
	State          string  `json:"state"`
	Error          string  `json:"error,omitempty"`
	Partitions     int32   `json:"partitions"`
	Bytes          int64   `json:"bytes"`
	CapacityBytes  int64   `json:"capacity_bytes"`
	FreeBytes      int64   `json:"free_bytes"`
	WriteBytesPerS float64 `json:"write_bytes_per_s"`
	ProjectedBytes int64   `json:"projected_bytes"`
	UsedPercent    float64 `json:"used_percent"`
}

func diskRows(dirs []*messages.LogDirInfo) []diskRow {
	rows := make([]diskRow, 0, len(dirs))
	for _, d := range dirs {
		r := diskRow{Path: d.Path, State: d.State, Error: d.Error, Partitions: d.Partitions, Bytes: d.Bytes,
			CapacityBytes: d.CapacityBytes, FreeBytes: d.FreeBytes, WriteBytesPerS: d.WriteBytesPerS, ProjectedBytes: d.ProjectedBytes}
		if d.CapacityBytes > 0 {
			r.UsedPercent = float64(d.Bytes) / float64(d.CapacityBytes) * 100
		}
		rows = append(rows, r)
	}
	return rows
}

func (g *globals) printDisks(rows []diskRow) error {
	w := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "PATH\tSTATE\tPARTITIONS\tBYTES\tUSED\tCAPACITY\tFREE\tWRITE/S")
	for _, r := range rows {
		fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%.1f%%\t%s\t%s\t%s\n", r.Path, r.State, r.Partitions, humanBytes(r.Bytes),
			r.UsedPercent, humanBytes(r.CapacityBytes), humanBytes(r.FreeBytes), humanBytes(int64(r.WriteBytesPerS)))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	for _, r := range rows {
		if r.Error != "" {
			fmt.Fprintf(g.stdout, "%s is %s: %s\n", r.Path, r.State, r.Error)
		}
	}
	return nil
}

// humanBytes renders n in binary units.
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%dB", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f%ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

func newDisksCommand(g *globals) *cobra.Command {
	var nodeAddr string
	run := func(fn func(ctx context.Context, c *client.Client) error) func(*cobra.Command, []string) error {
		return func(cmd *cobra.Command, _ []string) error { return g.withClient(cmd, fn) }
	}
	cmd := &cobra.Command{
		Use:   "disks",
		Short: "Show a node's log directories: state, partitions, bytes, capacity, free, write rate",
		Args:  cobra.NoArgs,
		RunE: run(func(ctx context.Context, c *client.Client) error {
			resp, err := c.DescribeLogDirs(ctx, nodeAddr)
			if err != nil {
				return err
			}
			rows := diskRows(resp.Dirs)
			if g.output == "json" {
				return g.printJSON(rows)
			}
			return g.printDisks(rows)
		}),
	}
	cmd.PersistentFlags().StringVar(&nodeAddr, "node", "", "address of the node whose disks to act on (default: the first of --brokers)")

	add := &cobra.Command{
		Use:   "add PATH[=CAPACITY]",
		Short: "Add a log directory to a running node (it survives restarts)",
		Args:  cobra.ExactArgs(1),
	}
	add.RunE = func(cmd *cobra.Command, args []string) error {
		path, capText, hasCap := strings.Cut(args[0], "=")
		var capacity int64
		if hasCap {
			n, err := node.ParseBytes(capText)
			if err != nil {
				return usage.Errorf("%s: %v", args[0], err)
			}
			capacity = n
		}
		return run(func(ctx context.Context, c *client.Client) error {
			if err := c.AddLogDir(ctx, nodeAddr, path, capacity); err != nil {
				return fmt.Errorf("add log dir %s: %w", path, err)
			}
			fmt.Fprintf(g.stdout, "added log dir %s\n", path)
			return nil
		})(cmd, args)
	}

	drain := &cobra.Command{
		Use:   "drain PATH",
		Short: "Move every partition off a log directory so that it can be removed",
		Args:  cobra.ExactArgs(1),
	}
	drain.RunE = func(cmd *cobra.Command, args []string) error {
		return run(func(ctx context.Context, c *client.Client) error {
			moves, err := c.DrainLogDir(ctx, nodeAddr, args[0])
			if err != nil {
				return fmt.Errorf("drain log dir %s: %w", args[0], err)
			}
			if g.output == "json" {
				return g.printJSON(moves)
			}
			fmt.Fprintf(g.stdout, "draining %s: %d partitions to move\n", args[0], len(moves))
			return printMoves(g, moves)
		})(cmd, args)
	}

	var dryRun bool
	balance := &cobra.Command{
		Use:   "balance",
		Short: "Show the balancer's plan and, without --dry-run, carry it out",
		Args:  cobra.NoArgs,
		RunE: run(func(ctx context.Context, c *client.Client) error {
			resp, err := c.Balance(ctx, nodeAddr, dryRun)
			if err != nil {
				return err
			}
			if g.output == "json" {
				return g.printJSON(map[string]any{"moves": resp.Moves, "before": diskRows(resp.Before), "after": diskRows(resp.After), "running": resp.Running})
			}
			if len(resp.Moves) == 0 {
				fmt.Fprintln(g.stdout, "balanced: no move needed")
			} else {
				verb := "moving"
				if dryRun {
					verb = "would move"
				}
				var total int64
				for _, m := range resp.Moves {
					total += m.Bytes
				}
				fmt.Fprintf(g.stdout, "%s %d partitions, %s\n", verb, len(resp.Moves), humanBytes(total))
				if err := printMoves(g, resp.Moves); err != nil {
					return err
				}
			}
			fmt.Fprintln(g.stdout, "\nNOW")
			if err := g.printDisks(diskRows(resp.Before)); err != nil {
				return err
			}
			fmt.Fprintln(g.stdout, "\nAFTER")
			return g.printDisks(diskRows(resp.After))
		}),
	}
	balance.Flags().BoolVar(&dryRun, "dry-run", false, "only show the plan")
	cmd.AddCommand(add, drain, balance)
	return cmd
}

func printMoves(g *globals, moves []*messages.PartitionMove) error {
	w := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "TOPIC\tPARTITION\tFROM\tTO\tBYTES")
	for _, m := range moves {
		fmt.Fprintf(w, "%s\t%d\t%s\t%s\t%s\n", m.Topic, m.Partition, m.FromDir, m.ToDir, humanBytes(m.Bytes))
	}
	return w.Flush()
}

// ---- depot consume -g ----

// groupCommitInterval is how often `depot consume -g` commits what it has
// printed.
const groupCommitInterval = 5 * time.Second

// consumeGroup prints topic's records as a member of group and commits the
// position after each record printed (never one not yet written out): every
// groupCommitInterval, when the group takes partitions away, and on exit.
func consumeGroup(g *globals, topic, group, offset string, count int, format string, partitions []int32) error {
	if group == "" {
		return usage.Errorf("-g: empty group id")
	}
	if len(partitions) > 0 {
		return usage.Errorf("-p cannot be used with -g: the group assigns the partitions")
	}
	var reset client.ResetPolicy
	switch offset {
	case "start", "earliest":
		reset = client.ResetEarliest
	case "end", "latest":
		reset = client.ResetLatest
	default:
		return usage.Errorf("--offset %q: with -g, want start or end (where partitions with no committed offset start)", offset)
	}
	c, err := g.client()
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, stop := signalContext()
	defer stop()
	md, err := c.Metadata(ctx, topic)
	if err != nil {
		return err
	}
	if len(md.Topics) != 1 || md.Topics[0].Error != messages.ErrorCode_NONE {
		return fmt.Errorf("unknown topic %s", topic)
	}
	printed := map[client.TopicPartition]int64{} // next offset after each record written out
	var gc *client.GroupConsumer
	commitRevoked := func(ctx context.Context, tps []client.TopicPartition) {
		offsets := map[client.TopicPartition]int64{}
		for _, tp := range tps {
			if next, ok := printed[tp]; ok {
				offsets[tp] = next
			}
		}
		if err := gc.CommitOffsets(ctx, offsets); err != nil {
			fmt.Fprintf(g.stderr, "depot: commit revoked partitions: %v\n", oneLine(err))
		}
		for _, tp := range tps {
			delete(printed, tp)
		}
	}
	gc, err = c.NewGroupConsumer(group, []string{topic}, client.ResetOffset(reset), client.AutoCommit(0), client.OnRevoked(commitRevoked))
	if err != nil {
		return err
	}
	defer gc.Close()
	out := bufio.NewWriter(g.stdout)
	defer out.Flush()
	total := 0
	lastCommit := time.Now()
	var line []byte
	var pollErr error
	for count == 0 || total < count {
		records, err := gc.Poll(ctx)
		if err != nil {
			if ctx.Err() == nil {
				pollErr = err
			}
			break
		}
		done := map[client.TopicPartition]int64{}
		for _, r := range records {
			line = formatRecord(line[:0], format, r)
			out.Write(line)
			done[client.TopicPartition{Topic: r.Topic, Partition: r.Partition}] = r.Offset + 1
			total++
			if count > 0 && total >= count {
				break
			}
		}
		if err := out.Flush(); err != nil {
			return err
		}
		maps.Copy(printed, done)
		if time.Since(lastCommit) >= groupCommitInterval {
			lastCommit = time.Now()
			if err := gc.CommitOffsets(ctx, printed); err != nil && ctx.Err() == nil {
				fmt.Fprintf(g.stderr, "depot: commit: %v\n", oneLine(err))
			}
		}
	}
	commitCtx, cancel := context.WithTimeout(context.Background(), g.timeout)
	defer cancel()
	if err := gc.CommitOffsets(commitCtx, printed); err != nil {
		return errors.Join(pollErr, fmt.Errorf("commit offsets of group %s: %w", group, err))
	}
	return pollErr
}

// ---- depot group ----

func newGroupCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "group", Short: "List, describe, reset the offsets of, and delete consumer groups"}
	cmd.AddCommand(newGroupListCommand(g), newGroupDescribeCommand(g), newGroupResetOffsetsCommand(g), newGroupDeleteCommand(g))
	return cmd
}

// withClient runs fn with a client and a context bounded by --timeout.
func (g *globals) withClient(cmd *cobra.Command, fn func(ctx context.Context, c *client.Client) error) error {
	c, err := g.client()
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(cmd.Context(), g.timeout)
	defer cancel()
	return fn(ctx, c)
}

// groupArg checks a group id given on the command line.
func groupArg(args []string) (string, error) {
	if args[0] == "" {
		return "", usage.Errorf("empty group id")
	}
	return args[0], nil
}

// groupError makes a group's broker error read as the command's outcome.
func groupError(group string, err error) error {
	switch {
	case errors.Is(err, client.ErrGroupIDNotFound):
		return fmt.Errorf("unknown group %s", group)
	case errors.Is(err, client.ErrNonEmptyGroup), errors.Is(err, client.ErrUnknownMemberID), errors.Is(err, client.ErrRebalanceInProgress):
		return fmt.Errorf("group %s is not empty: stop its consumers first (%w)", group, err)
	}
	return err
}

func newGroupListCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List consumer groups",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				groups, err := c.ListGroups(ctx)
				if err != nil {
					return err
				}
				type row struct {
					Group   string `json:"group"`
					State   string `json:"state"`
					Members int32  `json:"members"`
				}
				rows := []row{}
				for _, gr := range groups {
					rows = append(rows, row{Group: gr.GroupId, State: gr.State, Members: gr.Members})
				}
				if g.output == "json" {
					return g.printJSON(rows)
				}
				w := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(w, "GROUP\tSTATE\tMEMBERS")
				for _, r := range rows {
					fmt.Fprintf(w, "%s\t%s\t%d\n", r.Group, r.State, r.Members)
				}
				return w.Flush()
			})
		},
	}
}

// groupDescription is `depot group describe -o json`.
type groupDescription struct {
	Group      string              `json:"group"`
	State      string              `json:"state"`
	Generation int32               `json:"generation"`
	Assignor   string              `json:"assignor"`
	Members    []groupMemberRow    `json:"members"`
	Partitions []groupPartitionRow `json:"partitions"`
}

type groupMemberRow struct {
	MemberID   string   `json:"member_id"`
	InstanceID string   `json:"instance_id,omitempty"`
	ClientID   string   `json:"client_id"`
	Partitions []string `json:"partitions"`
}

// groupPartitionRow is one partition of a group: committed is -1 where
// nothing is committed, and lag is then -1 too.
type groupPartitionRow struct {
	Topic        string `json:"topic"`
	Partition    int32  `json:"partition"`
	Committed    int64  `json:"committed"`
	LogEndOffset int64  `json:"log_end_offset"`
	Lag          int64  `json:"lag"`
	Owner        string `json:"owner,omitempty"`
	Error        string `json:"error,omitempty"`
}

// describeGroup gathers a group's description, with each partition's log
// end offset and lag.
func describeGroup(ctx context.Context, c *client.Client, group string) (*groupDescription, error) {
	d, err := c.DescribeGroup(ctx, group)
	if err != nil {
		return nil, groupError(group, err)
	}
	out := &groupDescription{Group: group, State: d.State, Generation: d.Generation, Assignor: d.Assignor, Members: []groupMemberRow{}, Partitions: []groupPartitionRow{}}
	rows := map[client.TopicPartition]*groupPartitionRow{}
	row := func(topic string, partition int32) *groupPartitionRow {
		tp := client.TopicPartition{Topic: topic, Partition: partition}
		if rows[tp] == nil {
			rows[tp] = &groupPartitionRow{Topic: topic, Partition: partition, Committed: -1, Lag: -1}
		}
		return rows[tp]
	}
	for _, m := range d.Members {
		mr := groupMemberRow{MemberID: m.MemberId, InstanceID: m.GroupInstanceId, ClientID: m.ClientId, Partitions: []string{}}
		for _, tp := range m.Assignment {
			mr.Partitions = append(mr.Partitions, fmt.Sprintf("%s-%d", tp.Topic, tp.Partition))
			row(tp.Topic, tp.Partition).Owner = m.MemberId
		}
		out.Members = append(out.Members, mr)
	}
	for _, o := range d.Offsets {
		r := row(o.Topic, o.Partition)
		if o.Offset >= 0 {
			r.Committed = o.Offset
		}
	}
	for _, r := range rows {
		end, err := c.ListOffset(ctx, r.Topic, r.Partition, client.LatestOffset)
		if err != nil {
			r.LogEndOffset, r.Error = -1, oneLine(err)
		} else {
			r.LogEndOffset = end
			if r.Committed >= 0 {
				r.Lag = max(0, end-r.Committed)
			}
		}
		out.Partitions = append(out.Partitions, *r)
	}
	sort.Slice(out.Partitions, func(i, j int) bool {
		a, b := out.Partitions[i], out.Partitions[j]
		if a.Topic != b.Topic {
			return a.Topic < b.Topic
		}
		return a.Partition < b.Partition
	})
	return out, nil
}

// dash prints n, or "-" when it is negative (unknown).
func dash(n int64) string {
	if n < 0 {
		return "-"
	}
	return strconv.FormatInt(n, 10)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func newGroupDescribeCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "describe GROUP",
		Short: "Show a group's state and members, and per partition its committed offset, log end offset, lag and owner",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			group, err := groupArg(args)
			if err != nil {
				return err
			}
			return g.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				d, err := describeGroup(ctx, c, group)
				if err != nil {
					return err
				}
				if g.output == "json" {
					return g.printJSON(d)
				}
				var lag int64
				for _, p := range d.Partitions {
					lag += max(p.Lag, 0)
				}
				fmt.Fprintf(g.stdout, "GROUP       %s\nSTATE       %s\nGENERATION  %d\nASSIGNOR    %s\nMEMBERS     %d\nTOTAL-LAG   %d\n",
					d.Group, d.State, d.Generation, orDash(d.Assignor), len(d.Members), lag)
				if len(d.Members) > 0 {
					fmt.Fprintln(g.stdout, "\nMEMBERS")
					w := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
					fmt.Fprintln(w, "MEMBER-ID\tINSTANCE-ID\tCLIENT-ID\tPARTITIONS")
					for _, m := range d.Members {
						fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", m.MemberID, orDash(m.InstanceID), orDash(m.ClientID), orDash(strings.Join(m.Partitions, ",")))
					}
					w.Flush()
				}
				fmt.Fprintln(g.stdout, "\nPARTITIONS")
				w := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(w, "TOPIC\tPARTITION\tCOMMITTED\tLOG-END\tLAG\tOWNER")
				for _, p := range d.Partitions {
					fmt.Fprintf(w, "%s\t%d\t%s\t%s\t%s\t%s", p.Topic, p.Partition, dash(p.Committed), dash(p.LogEndOffset), dash(p.Lag), orDash(p.Owner))
					if p.Error != "" {
						fmt.Fprintf(w, "\t%s", p.Error)
					}
					fmt.Fprintln(w)
				}
				return w.Flush()
			})
		},
	}
}

func newGroupResetOffsetsCommand(g *globals) *cobra.Command {
	var (
		topic      string
		partitions []int32
		toEarliest bool
		toLatest   bool
		toOffset   int64
		toDatetime string
	)
	cmd := &cobra.Command{
		Use:   "reset-offsets GROUP --topic TOPIC (--to-earliest | --to-latest | --to-offset N | --to-datetime RFC3339)",
		Short: "Set a group's committed offsets of a topic (the group must have no member)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			group, err := groupArg(args)
			if err != nil {
				return err
			}
			if topic == "" {
				return usage.Errorf("--topic is required")
			}
			chosen := 0
			for _, name := range []string{"to-earliest", "to-latest", "to-offset", "to-datetime"} {
				if cmd.Flags().Changed(name) {
					chosen++
				}
			}
			if chosen != 1 {
				return usage.Errorf("give exactly one of --to-earliest, --to-latest, --to-offset, --to-datetime")
			}
			if cmd.Flags().Changed("to-offset") && toOffset < 0 {
				return usage.Errorf("--to-offset %d: want a non-negative offset", toOffset)
			}
			var at time.Time
			if cmd.Flags().Changed("to-datetime") {
				if at, err = time.Parse(time.RFC3339, toDatetime); err != nil {
					return usage.Errorf("--to-datetime %q: want RFC 3339, like 2024-05-01T12:00:00Z", toDatetime)
				}
			}
			return g.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				d, err := c.DescribeGroup(ctx, group)
				switch {
				case errors.Is(err, client.ErrGroupIDNotFound):
					d = &messages.DescribeGroupResponse{}
				case err != nil:
					return err
				case len(d.Members) > 0 || (d.State != "Empty" && d.State != "Dead"):
					return fmt.Errorf("group %s is not empty (state %s, %d members): stop its consumers before resetting offsets", group, d.State, len(d.Members))
				}
				md, err := c.Metadata(ctx, topic)
				if err != nil {
					return err
				}
				if len(md.Topics) != 1 || md.Topics[0].Error != messages.ErrorCode_NONE {
					return fmt.Errorf("unknown topic %s", topic)
				}
				n := int32(len(md.Topics[0].Partitions))
				if len(partitions) == 0 {
					for p := range n {
						partitions = append(partitions, p)
					}
				}
				previous := map[client.TopicPartition]int64{}
				for _, o := range d.Offsets {
					previous[client.TopicPartition{Topic: o.Topic, Partition: o.Partition}] = o.Offset
				}
				offsets := map[client.TopicPartition]int64{}
				for _, p := range partitions {
					if p < 0 || p >= n {
						return usage.Errorf("--partitions %d: topic %s has partitions 0 to %d", p, topic, n-1)
					}
					o, err := resetTarget(ctx, c, topic, p, toEarliest, toLatest, cmd.Flags().Changed("to-offset"), toOffset, at)
					if err != nil {
						return err
					}
					offsets[client.TopicPartition{Topic: topic, Partition: p}] = o
				}
				if err := c.AlterGroupOffsets(ctx, group, offsets); err != nil {
					return groupError(group, err)
				}
				type row struct {
					Topic     string `json:"topic"`
					Partition int32  `json:"partition"`
					Previous  int64  `json:"previous"`
					Offset    int64  `json:"offset"`
				}
				rows := []row{}
				for _, p := range partitions {
					tp := client.TopicPartition{Topic: topic, Partition: p}
					prev, ok := previous[tp]
					if !ok {
						prev = -1
					}
					rows = append(rows, row{Topic: topic, Partition: p, Previous: prev, Offset: offsets[tp]})
				}
				sort.Slice(rows, func(i, j int) bool { return rows[i].Partition < rows[j].Partition })
				if g.output == "json" {
					return g.printJSON(rows)
				}
				w := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(w, "TOPIC\tPARTITION\tPREVIOUS\tNEW")
				for _, r := range rows {
					fmt.Fprintf(w, "%s\t%d\t%s\t%d\n", r.Topic, r.Partition, dash(r.Previous), r.Offset)
				}
				return w.Flush()
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&topic, "topic", "", "the topic whose offsets to reset")
	f.Int32SliceVar(&partitions, "partitions", nil, "only these partitions (default: all)")
	f.BoolVar(&toEarliest, "to-earliest", false, "to the first offset still stored")
	f.BoolVar(&toLatest, "to-latest", false, "to the end: skip every record stored now")
	f.Int64Var(&toOffset, "to-offset", 0, "to this offset (kept within the partition's first and end offsets)")
	f.StringVar(&toDatetime, "to-datetime", "", "to the first record at or after this RFC 3339 time (the end when none is)")
	return cmd
}

// resetTarget is the offset a partition resets to.
func resetTarget(ctx context.Context, c *client.Client, topic string, p int32, earliest, latest, exact bool, offset int64, at time.Time) (int64, error) {
	list := func(ts int64) (int64, error) {
		o, err := c.ListOffset(ctx, topic, p, ts)
		if err != nil {
			return 0, fmt.Errorf("offsets of %s-%d: %w", topic, p, err)
		}
		return o, nil
	}
	switch {
	case earliest:
		return list(client.EarliestOffset)
	case latest:
		return list(client.LatestOffset)
	case exact:
		start, err := list(client.EarliestOffset)
		if err != nil {
			return 0, err
		}
		end, err := list(client.LatestOffset)
		if err != nil {
			return 0, err
		}
		return min(max(offset, start), end), nil
	}
	o, err := list(at.UnixMilli())
	if err != nil || o >= 0 {
		return o, err
	}
	return list(client.LatestOffset)
}

func newGroupDeleteCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "delete GROUP...",
		Short: "Delete groups with no member, and their committed offsets",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			for _, group := range args {
				if group == "" {
					return usage.Errorf("empty group id")
				}
			}
			return g.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				for _, group := range args {
					if err := c.DeleteGroup(ctx, group); err != nil {
						return groupError(group, err)
					}
					fmt.Fprintf(g.stdout, "deleted group %s\n", group)
				}
				return nil
			})
		},
	}
}
