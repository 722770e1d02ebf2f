package cli

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/depot-dev/depot/actors/client"
	"github.com/depot-dev/depot/messages"
	"github.com/depot-dev/depot/node"
)

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
					return node.Usagef("-c %q: want key=value", kv)
				}
				cfg[k] = v
			}
			if partitions < 1 {
				return node.Usagef("-p %d: a topic needs at least one partition", partitions)
			}
			return g.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				for _, name := range args {
					md, err := c.CreateTopic(ctx, name, partitions, cfg)
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
				t, err := describeTopic(ctx, c, args[0])
				if err != nil {
					return err
				}
				parts := make([]partitionDescription, 0, len(t.Partitions))
				for _, p := range t.Partitions {
					d := partitionDescription{Partition: p.Partition, Leader: p.Leader, LogDir: p.LogDir}
					st, err := c.PartitionStatus(ctx, t.Name, p.Partition)
					if err != nil {
						d.Error = g.present(err).Error()
					} else {
						d.LogDir, d.LogStartOffset, d.LogEndOffset, d.Bytes, d.Segments = st.LogDir, st.LogStartOffset, st.LogEndOffset, st.SizeBytes, st.Segments
					}
					parts = append(parts, d)
				}
				sort.Slice(parts, func(i, j int) bool { return parts[i].Partition < parts[j].Partition })
				if g.output == "json" {
					configs := t.Configs
					if configs == nil {
						configs = map[string]string{}
					}
					return g.printJSON(map[string]any{"name": t.Name, "internal": t.Internal, "configs": configs, "partitions": parts})
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
