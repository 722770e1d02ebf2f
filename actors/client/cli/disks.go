package cli

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/depot-dev/depot/actors/client"
	"github.com/depot-dev/depot/messages"
	"github.com/depot-dev/depot/node"
)

// diskRow is one log directory in `depot disks -o json`.
type diskRow struct {
	Path           string  `json:"path"`
	State          string  `json:"state"`
	Draining       bool    `json:"draining"`
	Error          string  `json:"error,omitempty"`
	Partitions     int32   `json:"partitions"`
	Bytes          int64   `json:"bytes"`
	CapacityBytes  int64   `json:"capacity_bytes"`
	FreeBytes      int64   `json:"free_bytes"`
	ReserveBytes   int64   `json:"reserve_bytes"`
	WriteBytesPerS float64 `json:"write_bytes_per_s"`
	ProjectedBytes int64   `json:"projected_bytes"`
	UsedPercent    float64 `json:"used_percent"`
}

func diskRows(dirs []*messages.LogDirInfo) []diskRow {
	rows := make([]diskRow, 0, len(dirs))
	for _, d := range dirs {
		r := diskRow{Path: d.Path, State: d.State, Draining: d.Draining, ReserveBytes: d.ReserveBytes, Error: d.Error, Partitions: d.Partitions, Bytes: d.Bytes,
			CapacityBytes: d.CapacityBytes, FreeBytes: d.FreeBytes, WriteBytesPerS: d.WriteBytesPerS, ProjectedBytes: d.ProjectedBytes}
		if d.CapacityBytes > 0 {
			r.UsedPercent = float64(d.Bytes) / float64(d.CapacityBytes) * 100
		}
		rows = append(rows, r)
	}
	return rows
}

// moveRow is one partition move in `depot disks drain -o json` and
// `depot disks balance -o json`.
type moveRow struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	FromDir   string `json:"from_dir"`
	ToDir     string `json:"to_dir"`
	Bytes     int64  `json:"bytes"`
}

// moveRows is moves as JSON rows: an empty list, not null, when there are
// none.
func moveRows(moves ...*messages.PartitionMove) []moveRow {
	rows := make([]moveRow, 0, len(moves))
	for _, m := range moves {
		if m != nil {
			rows = append(rows, moveRow{Topic: m.Topic, Partition: m.Partition, FromDir: m.FromDir, ToDir: m.ToDir, Bytes: m.Bytes})
		}
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
		if r.State == "full" {
			fmt.Fprintf(g.stdout, "%s is full: %s free, under its reserve of %s; appends to its partitions are refused until %s is free\n",
				r.Path, humanBytes(r.FreeBytes), humanBytes(r.ReserveBytes), humanBytes(2*r.ReserveBytes))
		}
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
	run := func(fn func(ctx context.Context, c *client.Client) error) func(*cobra.Command, []string) error {
		return func(cmd *cobra.Command, _ []string) error { return g.withClient(cmd, fn) }
	}
	cmd := &cobra.Command{
		Use:   "disks",
		Short: "Show a node's log directories: state, partitions, bytes, capacity, free, write rate",
		Args:  cobra.NoArgs,
		RunE: run(func(ctx context.Context, c *client.Client) error {
			resp, err := c.DescribeLogDirs(ctx, g.node)
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
	cmd.PersistentFlags().StringVar(&g.node, "node", "", "node whose disks to act on: its id, or its address (default: the first of --brokers)")

	var force bool
	add := &cobra.Command{
		Use:   "add PATH[=CAPACITY]",
		Short: "Add a log directory to a running node (it survives restarts)",
		Long: `Add a log directory to a running node; it survives restarts. PATH must exist:
a mistyped mount point is refused rather than created. A directory on the same file
system as another log dir needs a declared capacity (PATH=CAPACITY, e.g. /mnt/b=100GiB)
on one of them, or --force: they would otherwise share the file system's space, and
balancing between them would mean little.`,
		Args: cobra.ExactArgs(1),
	}
	add.Flags().BoolVar(&force, "force", false, "add it even on the file system of another log dir with no capacity declared")
	add.RunE = func(cmd *cobra.Command, args []string) error {
		path, capText, hasCap := strings.Cut(args[0], "=")
		var capacity int64
		if hasCap {
			n, err := node.ParseBytes(capText)
			if err != nil {
				return node.Usagef("%s: %v", args[0], err)
			}
			capacity = n
		}
		return run(func(ctx context.Context, c *client.Client) error {
			if err := c.AddLogDir(ctx, g.node, path, capacity, force); err != nil {
				return err
			}
			fmt.Fprintf(g.stdout, "added log dir %s\n", path)
			return nil
		})(cmd, args)
	}

	undrain := &cobra.Command{
		Use:   "undrain PATH",
		Short: "Undo a drain: the log directory takes partitions again",
		Args:  cobra.ExactArgs(1),
	}
	undrain.RunE = func(cmd *cobra.Command, args []string) error {
		return run(func(ctx context.Context, c *client.Client) error {
			if err := c.UndrainLogDir(ctx, g.node, args[0]); err != nil {
				return err
			}
			fmt.Fprintf(g.stdout, "%s takes partitions again\n", args[0])
			return nil
		})(cmd, args)
	}

	remove := &cobra.Command{
		Use:   "remove PATH",
		Short: "Remove a drained log directory that holds no partition from the node",
		Long: `Remove a drained log directory that holds no partition from the node. Its files
stay where they are. Drop it from --log-dirs before the next start: a start that still
names it is refused. depot disks add takes it back.`,
		Args: cobra.ExactArgs(1),
	}
	remove.RunE = func(cmd *cobra.Command, args []string) error {
		return run(func(ctx context.Context, c *client.Client) error {
			if err := c.RemoveLogDir(ctx, g.node, args[0]); err != nil {
				return err
			}
			fmt.Fprintf(g.stdout, "removed log dir %s: drop it from --log-dirs before the next start\n", args[0])
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
			moves, err := c.DrainLogDir(ctx, g.node, args[0])
			if err != nil {
				return err
			}
			if g.output == "json" {
				return g.printJSON(moveRows(moves...))
			}
			fmt.Fprintf(g.stdout, "draining %s: %d partitions to move\n", args[0], len(moves))
			return printMoves(g, moves)
		})(cmd, args)
	}

	var dryRun bool
	balance := &cobra.Command{
		Use:   "balance",
		Short: "Show the balancer's plan and, without --dry-run, carry it out",
		Long: `Show the balancer's plan and, without --dry-run, carry it out. With -o json: an
object of moves (the plan, a list of {topic, partition, from_dir, to_dir, bytes}),
running (the move under way, in a list of at most one; moves run one at a time),
before and after (the log dirs now and as the plan leaves them, as depot disks -o json
lists them). A list with nothing in it is [], never null.`,
		Args: cobra.NoArgs,
		RunE: run(func(ctx context.Context, c *client.Client) error {
			resp, err := c.Balance(ctx, g.node, dryRun)
			if err != nil {
				return err
			}
			if g.output == "json" {
				return g.printJSON(map[string]any{"moves": moveRows(resp.Moves...), "before": diskRows(resp.Before), "after": diskRows(resp.After), "running": moveRows(resp.Running)})
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
	cmd.AddCommand(add, drain, undrain, remove, balance)
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
