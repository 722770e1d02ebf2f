package cli

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/depot-dev/depot/actors/client"
	"github.com/depot-dev/depot/actors/topic"
	"github.com/depot-dev/depot/messages"
	"github.com/depot-dev/depot/node"
)

func newTopicCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "topic", Short: "Create, list, describe, alter and delete topics"}
	cmd.AddCommand(newTopicCreateCommand(g), newTopicListCommand(g), newTopicDescribeCommand(g), newTopicDeleteCommand(g), newTopicElectLeadersCommand(g), newTopicReassignCommand(g),
		newTopicAddPartitionsCommand(g), newTopicAlterConfigCommand(g))
	return cmd
}

func newTopicCreateCommand(g *globals) *cobra.Command {
	var (
		partitions, replication int32
		configs                 []string
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
					return node.Usagef("-c %q: want key=value", kv)
				}
				cfg[k] = v
			}
			if partitions < 1 {
				return node.Usagef("-p %d: a topic needs at least one partition", partitions)
			}
			if replication < 0 {
				return node.Usagef("-r %d: a replication factor is at least 1", replication)
			}
			return g.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				for _, name := range args {
					md, err := c.CreateTopicReplicated(ctx, name, partitions, replication, cfg)
					if err != nil {
						return err
					}
					if g.output == "json" {
						if err := g.printJSON(map[string]any{"topic": md.Name, "partitions": len(md.Partitions)}); err != nil {
							return err
						}
						continue
					}
					fmt.Fprintf(g.stdout, "created topic %s with %s\n", md.Name, plural(len(md.Partitions), "partition"))
				}
				return nil
			})
		},
	}
	cmd.Flags().Int32VarP(&partitions, "partitions", "p", 1, "number of partitions")
	cmd.Flags().Int32VarP(&replication, "replication-factor", "r", 0, "replicas of each partition, which the cluster allows up to its live nodes (default: the cluster's, 1)")
	cmd.Flags().StringArrayVarP(&configs, "config", "c", nil, "topic config key=value (Kafka's names: retention.ms, segment.bytes, ...); repeatable")
	return cmd
}

func newTopicListCommand(g *globals) *cobra.Command {
	var underReplicated, underMinISR, unavailable bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List topics, or the partitions that are under-replicated, under min.insync.replicas, or without a leader",
		Long: `List topics, or, with one of --under-replicated, --under-min-isr and
--unavailable, the partitions of every topic that are in that state, each
with its leader, replicas and in-sync replicas (ISR), as kafka-topics.sh
--describe does with --under-replicated-partitions,
--under-min-isr-partitions and --unavailable-partitions.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var filters []partitionFilter
			for _, f := range []struct {
				on     bool
				filter partitionFilter
			}{{underReplicated, isUnderReplicated}, {underMinISR, isUnderMinISR}, {unavailable, isUnavailable}} {
				if f.on {
					filters = append(filters, f.filter)
				}
			}
			if len(filters) > 1 {
				return node.Usagef("--under-replicated, --under-min-isr and --unavailable: give one")
			}
			return g.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				md, err := c.Metadata(ctx)
				if err != nil {
					return err
				}
				sort.Slice(md.Topics, func(i, j int) bool { return md.Topics[i].Name < md.Topics[j].Name })
				if len(filters) == 1 {
					return g.printPartitionListings(listPartitions(md.Topics, filters[0]))
				}
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
	cmd.Flags().BoolVar(&underReplicated, "under-replicated", false, "list the partitions with fewer in-sync replicas than replicas")
	cmd.Flags().BoolVar(&underMinISR, "under-min-isr", false, "list the partitions with fewer in-sync replicas than their topic's min.insync.replicas (default 1)")
	cmd.Flags().BoolVar(&unavailable, "unavailable", false, "list the partitions without a leader")
	return cmd
}

// partitionListing is one partition in `depot topic list
// --under-replicated`, `--under-min-isr` and `--unavailable`.
type partitionListing struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// Leader is -1 when the partition has none.
	Leader   int32   `json:"leader"`
	Replicas []int32 `json:"replicas"`
	ISR      []int32 `json:"isr"`
}

// partitionFilter says whether a partition of topic t is listed.
type partitionFilter func(t *messages.TopicMetadata, p *messages.PartitionMetadata) bool

// isUnderReplicated: fewer in-sync replicas than replicas.
func isUnderReplicated(_ *messages.TopicMetadata, p *messages.PartitionMetadata) bool {
	return len(p.Isr) < len(p.Replicas)
}

// isUnderMinISR: fewer in-sync replicas than the topic's
// min.insync.replicas.
func isUnderMinISR(t *messages.TopicMetadata, p *messages.PartitionMetadata) bool {
	return len(p.Isr) < minInsyncReplicas(t)
}

// isUnavailable: no leader.
func isUnavailable(_ *messages.TopicMetadata, p *messages.PartitionMetadata) bool {
	return p.Leader < 0
}

// minInsyncReplicas is t's min.insync.replicas, its default (1) when the
// metadata does not give it as a positive number.
func minInsyncReplicas(t *messages.TopicMetadata) int {
	if n, err := strconv.Atoi(t.Configs[topic.ConfigMinInsyncReplicas]); err == nil && n > 0 {
		return n
	}
	return int(topic.DefaultConfig().MinInsyncReplicas)
}

// listPartitions is the partitions of topics that keep reports true of,
// by topic, then partition. A topic the metadata has an error for has no
// partitions to list.
func listPartitions(topics []*messages.TopicMetadata, keep partitionFilter) []partitionListing {
	out := []partitionListing{}
	for _, t := range topics {
		if t.Error != messages.ErrorCode_NONE {
			continue
		}
		for _, p := range t.Partitions {
			if keep(t, p) {
				out = append(out, partitionListing{
					Topic: t.Name, Partition: p.Partition, Leader: p.Leader,
					Replicas: append([]int32{}, p.Replicas...), ISR: append([]int32{}, p.Isr...),
				})
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].Partition < out[j].Partition
	})
	return out
}

// printPartitionListings prints rows as a table, or as JSON with -o json.
func (g *globals) printPartitionListings(rows []partitionListing) error {
	if g.output == "json" {
		return g.printJSON(rows)
	}
	w := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "TOPIC\tPARTITION\tLEADER\tREPLICAS\tISR")
	for _, r := range rows {
		fmt.Fprintf(w, "%s\t%d\t%s\t%s\t%s\n", r.Topic, r.Partition, leaderText(r.Leader), joinIDs(r.Replicas), joinIDs(r.ISR))
	}
	return w.Flush()
}

// partitionDescription is one partition in `depot topic describe`.
type partitionDescription struct {
	Partition int32 `json:"partition"`
	// Leader is -1 when the partition has none.
	Leader      int32         `json:"leader"`
	Replicas    []int32       `json:"replicas"`
	ISR         []int32       `json:"isr"`
	LeaderEpoch int32         `json:"leader_epoch"`
	LogDir      string        `json:"log_dir"`
	ReplicaDirs []replicaDirs `json:"replica_dirs"`
	// AddingReplicas and RemovingReplicas are those a reassignment in
	// flight adds and removes, [] when none is.
	AddingReplicas   []int32 `json:"adding_replicas"`
	RemovingReplicas []int32 `json:"removing_replicas"`
	LogStartOffset   int64   `json:"log_start_offset"`
	// HighWatermark is the leader's, -1 when it could not be asked.
	HighWatermark int64  `json:"high_watermark"`
	LogEndOffset  int64  `json:"log_end_offset"`
	Bytes         int64  `json:"bytes"`
	Segments      int32  `json:"segments"`
	Error         string `json:"error,omitempty"`
}

// replicaDirs is one replica of a partition in `depot topic describe`.
type replicaDirs struct {
	Node   int32  `json:"node"`
	LogDir string `json:"log_dir"`
	// LogEndOffset is -1 where the replica's node was not asked.
	LogEndOffset int64 `json:"log_end_offset"`
}

// describePartition is p as describe shows it, before its leader is asked
// for its log (see withStatus).
func describePartition(p *messages.PartitionMetadata) partitionDescription {
	d := partitionDescription{
		Partition: p.Partition, Leader: p.Leader, LogDir: p.LogDir, LeaderEpoch: p.LeaderEpoch,
		Replicas: append([]int32{}, p.Replicas...), ISR: append([]int32{}, p.Isr...), ReplicaDirs: []replicaDirs{},
		AddingReplicas: append([]int32{}, p.AddingReplicas...), RemovingReplicas: append([]int32{}, p.RemovingReplicas...),
		HighWatermark: -1,
	}
	for _, r := range p.ReplicaDirs {
		d.ReplicaDirs = append(d.ReplicaDirs, replicaDirs{Node: r.Node, LogDir: r.LogDir, LogEndOffset: r.LogEndOffset})
	}
	return d
}

// withStatus is d with what its leader's partition actor answered: its log
// dir, offsets, high watermark, bytes and segments, the leader's replica
// dir among them.
func (d partitionDescription) withStatus(st *messages.PartitionStatusResponse) partitionDescription {
	d.LogDir, d.LogStartOffset, d.HighWatermark, d.LogEndOffset = st.LogDir, st.LogStartOffset, st.HighWatermark, st.LogEndOffset
	d.Bytes, d.Segments = st.SizeBytes, st.Segments
	d.ReplicaDirs = slices.Clone(d.ReplicaDirs)
	for i := range d.ReplicaDirs {
		if d.ReplicaDirs[i].Node == d.Leader {
			d.ReplicaDirs[i].LogDir, d.ReplicaDirs[i].LogEndOffset = st.LogDir, st.LogEndOffset
		}
	}
	return d
}

// leaderText is a partition's leader as the tables show it: "none" for -1.
func leaderText(leader int32) string {
	if leader < 0 {
		return "none"
	}
	return fmt.Sprint(leader)
}

// joinIDs is ids as "1,2,3", "-" for none.
func joinIDs(ids []int32) string {
	if len(ids) == 0 {
		return "-"
	}
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = fmt.Sprint(id)
	}
	return strings.Join(parts, ",")
}

func newTopicDescribeCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "describe NAME",
		Short: "Show a topic's configs and, per partition, its leader, replicas, ISR, leader epoch, log dir, offsets, high watermark and bytes",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				t, err := describeTopic(ctx, c, args[0])
				if err != nil {
					return err
				}
				parts := make([]partitionDescription, 0, len(t.Partitions))
				for _, p := range t.Partitions {
					d := describePartition(p)
					if st, err := c.PartitionStatus(ctx, t.Name, p.Partition); err != nil {
						d.Error = g.present(err).Error()
					} else {
						d = d.withStatus(st)
					}
					parts = append(parts, d)
				}
				sort.Slice(parts, func(i, j int) bool { return parts[i].Partition < parts[j].Partition })
				if g.output == "json" {
					configs := t.Configs
					if configs == nil {
						configs = map[string]string{}
					}
					return g.printJSON(map[string]any{"name": t.Name, "topic_id": t.TopicId, "internal": t.Internal, "configs": configs, "partitions": parts})
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
				fmt.Fprintln(w, "PARTITION\tLEADER\tREPLICAS\tISR\tEPOCH\tLOG-DIR\tLOG-START\tHIGH-WATERMARK\tLOG-END\tBYTES\tSEGMENTS")
				for _, p := range parts {
					head := fmt.Sprintf("%d\t%s\t%s\t%s\t%d\t%s", p.Partition, leaderText(p.Leader), joinIDs(p.Replicas), joinIDs(p.ISR), p.LeaderEpoch, p.LogDir)
					if p.Error != "" {
						fmt.Fprintf(w, "%s\t-\t-\t-\t-\t-\t%s\n", head, p.Error)
						continue
					}
					fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%d\t%d\n", head, p.LogStartOffset, p.HighWatermark, p.LogEndOffset, p.Bytes, p.Segments)
				}
				return w.Flush()
			})
		},
	}
}

// describeTopic asks for the metadata of the topic name, and returns it,
// or the broker's error for it (the topic does not exist, its name is
// invalid).
func describeTopic(ctx context.Context, c *client.Client, name string) (*messages.TopicMetadata, error) {
	md, err := c.Metadata(ctx, name)
	if err != nil {
		return nil, err
	}
	for _, t := range md.Topics {
		if t.Name != name {
			continue
		}
		if t.Error != messages.ErrorCode_NONE {
			return nil, &client.Error{Code: t.Error, Message: t.ErrorMessage}
		}
		return t, nil
	}
	return nil, &client.Error{Code: messages.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION, Message: fmt.Sprintf("topic %q does not exist", name)}
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
						return err
					}
					fmt.Fprintf(g.stdout, "deleted topic %s\n", name)
				}
				return nil
			})
		},
	}
}
