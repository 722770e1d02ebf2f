package cli

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/depot-dev/depot/actors/client"
	"github.com/depot-dev/depot/node"
)

// newTopicAddPartitionsCommand is `depot topic add-partitions`, Kafka's
// kafka-topics.sh --alter --partitions.
func newTopicAddPartitionsCommand(g *globals) *cobra.Command {
	var partitions int32
	cmd := &cobra.Command{
		Use:   "add-partitions TOPIC --partitions N",
		Short: "Raise a topic's partition count to N",
		Long: "The new partitions are placed across the nodes as a new topic's are, with as many replicas as\n" +
			"the topic's first partition. A topic's partitions are never removed: N must be above its\n" +
			"count. Records with a key may then go to another partition than before.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if partitions < 1 {
				return node.Usagef("--partitions %d: give the topic's new partition count, above its count now", partitions)
			}
			return g.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				md, err := c.AddPartitions(ctx, args[0], partitions)
				if err != nil {
					return err
				}
				if g.output == "json" {
					return g.printJSON(map[string]any{"topic": md.GetName(), "partitions": len(md.GetPartitions())})
				}
				fmt.Fprintf(g.stdout, "topic %s has %s\n", md.GetName(), plural(len(md.GetPartitions()), "partition"))
				return nil
			})
		},
	}
	cmd.Flags().Int32VarP(&partitions, "partitions", "p", 0, "the topic's partition count after the change")
	_ = cmd.MarkFlagRequired("partitions")
	return cmd
}

// newTopicAlterConfigCommand is `depot topic alter-config`, Kafka's
// kafka-configs.sh --alter --add-config and --delete-config.
func newTopicAlterConfigCommand(g *globals) *cobra.Command {
	var (
		configs []string
		remove  []string
	)
	cmd := &cobra.Command{
		Use:   "alter-config TOPIC [-c KEY=VALUE]... [--delete KEY]...",
		Short: "Set or delete a topic's configs",
		Long: "Each -c sets a config, each --delete returns one to its default; the topic's other configs stay\n" +
			"as they are. Keys are Kafka's (retention.ms, segment.bytes, max.message.bytes, ...). An unknown\n" +
			"key or a bad value changes nothing. The topic's partitions apply the change at once: retention\n" +
			"at their next check, segment sizes at their next roll.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			set, err := parseConfigs(configs)
			if err != nil {
				return err
			}
			for _, key := range remove {
				if _, both := set[key]; both {
					return node.Usagef("%s is both set and deleted", key)
				}
			}
			if len(set) == 0 && len(remove) == 0 {
				return node.Usagef("nothing to change: give -c KEY=VALUE or --delete KEY")
			}
			return g.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				md, err := c.AlterTopicConfigs(ctx, args[0], set, remove)
				if err != nil {
					return err
				}
				configsSet := md.GetConfigsSet()
				if configsSet == nil {
					configsSet = map[string]string{}
				}
				if g.output == "json" {
					return g.printJSON(map[string]any{"topic": md.GetName(), "configs_set": configsSet, "configs": md.GetConfigs()})
				}
				keys := make([]string, 0, len(configsSet))
				for k := range configsSet {
					keys = append(keys, k)
				}
				sort.Strings(keys)
				pairs := make([]string, len(keys))
				for i, k := range keys {
					pairs[i] = k + "=" + configsSet[k]
				}
				if len(pairs) == 0 {
					fmt.Fprintf(g.stdout, "topic %s has every config at its default\n", md.GetName())
					return nil
				}
				fmt.Fprintf(g.stdout, "topic %s has configs set: %s\n", md.GetName(), strings.Join(pairs, ", "))
				return nil
			})
		},
	}
	cmd.Flags().StringArrayVarP(&configs, "config", "c", nil, "set a config key=value; repeatable")
	cmd.Flags().StringArrayVar(&remove, "delete", nil, "return a config to its default; repeatable")
	return cmd
}

// parseConfigs reads -c key=value flags.
func parseConfigs(flags []string) (map[string]string, error) {
	out := map[string]string{}
	for _, kv := range flags {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, node.Usagef("-c %q: want key=value", kv)
		}
		if _, twice := out[k]; twice {
			return nil, node.Usagef("-c %s is given twice", k)
		}
		out[k] = v
	}
	return out, nil
}
