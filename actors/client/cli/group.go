package cli

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/depot-dev/depot/actors/client"
	"github.com/depot-dev/depot/messages"
	"github.com/depot-dev/depot/node"
)

func newGroupCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "group", Short: "List, describe, reset the offsets of, and delete consumer groups"}
	cmd.AddCommand(newGroupListCommand(g), newGroupDescribeCommand(g), newGroupResetOffsetsCommand(g), newGroupDeleteCommand(g))
	return cmd
}

// groupArg checks a group id given on the command line.
func groupArg(args []string) (string, error) {
	if args[0] == "" {
		return "", node.Usagef("empty group id")
	}
	return args[0], nil
}

// groupError makes a group's broker error read as the command's outcome.
func groupError(group string, err error) error {
	switch {
	case errors.Is(err, client.ErrGroupIDNotFound):
		return statementf(err, "group %q does not exist", group)
	case errors.Is(err, client.ErrNonEmptyGroup), errors.Is(err, client.ErrUnknownMemberID), errors.Is(err, client.ErrRebalanceInProgress):
		return statementf(err, "group %q is not empty: stop its consumers first", group)
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

// groupPartitionRow is one partition of a group: one with a committed
// offset, or one assigned to a member, or both. Committed is -1 where
// nothing is committed, and lag is then -1 too (unknown: where the member
// starts depends on its reset policy), as Kafka's kafka-consumer-groups
// shows "-" for both; log_end_offset and lag are -1 where the log end
// offset could not be read, and error says why.
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
func (g *globals) describeGroup(ctx context.Context, c *client.Client, group string) (*groupDescription, error) {
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
			r.LogEndOffset, r.Error = -1, g.present(err).Error()
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

// totalLag is the TOTAL-LAG of `depot group describe`: the sum of the lags
// known, and how many partitions it leaves out.
func totalLag(parts []groupPartitionRow) string {
	var lag int64
	var uncommitted, noEnd int
	for _, p := range parts {
		switch {
		case p.LogEndOffset < 0:
			noEnd++
		case p.Committed < 0:
			uncommitted++
		default:
			lag += p.Lag
		}
	}
	var left []string
	if uncommitted > 0 {
		left = append(left, fmt.Sprintf("%s with no committed offset", plural(uncommitted, "partition")))
	}
	if noEnd > 0 {
		left = append(left, fmt.Sprintf("%s whose log end offset is unknown", plural(noEnd, "partition")))
	}
	if len(left) == 0 {
		return strconv.FormatInt(lag, 10)
	}
	return fmt.Sprintf("%d, not counting %s", lag, strings.Join(left, " and "))
}

// plural is n and noun: "1 partition", "2 partitions".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
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
		Long: `Show a group's state and members, and per partition its committed offset, log end
offset, lag and owner: every partition assigned to a member, and every partition with
a committed offset. A partition assigned but never committed shows - as its committed
offset and its lag, as Kafka's kafka-consumer-groups does (-1 in -o json): where its
member starts reading depends on the member's reset policy. TOTAL-LAG adds the lags
known, and says how many partitions it leaves out.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			group, err := groupArg(args)
			if err != nil {
				return err
			}
			return g.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				d, err := g.describeGroup(ctx, c, group)
				if err != nil {
					return err
				}
				if g.output == "json" {
					return g.printJSON(d)
				}
				fmt.Fprintf(g.stdout, "GROUP       %s\nSTATE       %s\nGENERATION  %d\nASSIGNOR    %s\nMEMBERS     %d\nTOTAL-LAG   %s\n",
					d.Group, d.State, d.Generation, orDash(d.Assignor), len(d.Members), totalLag(d.Partitions))
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
				return node.Usagef("--topic is required")
			}
			chosen := 0
			for _, name := range []string{"to-earliest", "to-latest", "to-offset", "to-datetime"} {
				if cmd.Flags().Changed(name) {
					chosen++
				}
			}
			if chosen != 1 {
				return node.Usagef("give exactly one of --to-earliest, --to-latest, --to-offset, --to-datetime")
			}
			if cmd.Flags().Changed("to-offset") && toOffset < 0 {
				return node.Usagef("--to-offset %d: want a non-negative offset", toOffset)
			}
			var at time.Time
			if cmd.Flags().Changed("to-datetime") {
				if at, err = time.Parse(time.RFC3339, toDatetime); err != nil {
					return node.Usagef("--to-datetime %q: want RFC 3339, like 2024-05-01T12:00:00Z", toDatetime)
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
					return statementf(nil, "group %q is not empty (%s, %s): stop its consumers before resetting its offsets", group, d.State, plural(len(d.Members), "member"))
				}
				t, err := describeTopic(ctx, c, topic)
				if err != nil {
					return err
				}
				n := int32(len(t.Partitions))
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
						return node.Usagef("--partitions %d: topic %s has partitions 0 to %d", p, topic, n-1)
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
		return c.ListOffset(ctx, topic, p, ts)
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
					return node.Usagef("empty group id")
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
