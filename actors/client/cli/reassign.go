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

// newTopicReassignCommand is `depot topic reassign`, Kafka's
// kafka-reassign-partitions.sh --execute, --cancel and --verify (KIP-455).
func newTopicReassignCommand(g *globals) *cobra.Command {
	var (
		partition      int32
		replicas       []int32
		cancel, status bool
	)
	cmd := &cobra.Command{
		Use:   "reassign TOPIC --partition P (--replicas N,... | --cancel) | --status [TOPIC]",
		Short: "Move a partition's replicas to other nodes online, cancel a move, or show the moves in flight",
		Long: "With --replicas, partition P's replicas move to the nodes listed, the first its preferred\n" +
			"leader: the replicas it adds start on their nodes and catch up from the leader, at most at\n" +
			"their node's --move-throttle, and once all of them are in sync the partition's replicas\n" +
			"become the list, a leader it leaves out hands over, and the replicas it leaves out are\n" +
			"deleted. A partition already moving is given the new list in place of the old.\n" +
			"With --cancel, P's move in flight ends: it goes back to its replicas before the move, and\n" +
			"the replicas it added are deleted.\n" +
			"With --status, each move in flight of TOPIC, or of every topic: its target, the replicas it\n" +
			"adds and removes, and how far each added replica has caught up with the leader's log end.",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			topic := ""
			if len(args) == 1 {
				topic = args[0]
			}
			given := cmd.Flags().Changed
			switch {
			case status && (given("replicas") || cancel || given("partition")):
				return node.Usagef("--status takes no --partition, --replicas or --cancel")
			case status:
				return g.withClient(cmd, func(ctx context.Context, c *client.Client) error {
					return g.reassignStatus(ctx, c, topic)
				})
			case topic == "":
				return node.Usagef("name the topic whose partition to reassign, or ask --status")
			case !given("partition"):
				return node.Usagef("--partition: name the partition to reassign")
			case given("replicas") == cancel:
				return node.Usagef("give either --replicas, the target, or --cancel")
			case given("replicas") && len(replicas) == 0:
				return node.Usagef("--replicas: name at least one node")
			}
			return g.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				if cancel {
					r, err := c.CancelReassignment(ctx, topic, partition)
					if err != nil {
						return err
					}
					return g.printReassigned(r, "cancelled")
				}
				r, err := c.ReassignPartition(ctx, topic, partition, replicas)
				if err != nil {
					return err
				}
				state := "reassigned"
				if len(r.GetAddingReplicas()) > 0 || len(r.GetRemovingReplicas()) > 0 {
					state = "reassigning"
				}
				return g.printReassigned(r, state)
			})
		},
	}
	cmd.Flags().Int32Var(&partition, "partition", 0, "the partition of TOPIC to reassign")
	cmd.Flags().Int32SliceVar(&replicas, "replicas", nil, "the target: node ids, comma-separated, the preferred leader first")
	cmd.Flags().BoolVar(&cancel, "cancel", false, "cancel the partition's move in flight")
	cmd.Flags().BoolVar(&status, "status", false, "show the moves in flight, of TOPIC or of every topic")
	return cmd
}

// orEmpty is list, [] rather than null for none.
func orEmpty(list []int32) []int32 {
	if list == nil {
		return []int32{}
	}
	return list
}

// printReassigned prints the outcome of a reassignment or its cancel:
// reassigning (in flight), reassigned (completed at once) or cancelled.
func (g *globals) printReassigned(r *messages.ReassignmentResult, state string) error {
	if g.output == "json" {
		return g.printJSON(map[string]any{
			"topic": r.GetTopic(), "partition": r.GetPartition(), "state": state, "replicas": orEmpty(r.GetReplicas()),
			"adding_replicas": orEmpty(r.GetAddingReplicas()), "removing_replicas": orEmpty(r.GetRemovingReplicas()),
		})
	}
	name := fmt.Sprintf("%s-%d", r.GetTopic(), r.GetPartition())
	switch state {
	case "reassigning":
		fmt.Fprintf(g.stdout, "reassigning %s: adding %s, removing %s; replicas %s until the replicas added are in sync\n",
			name, joinIDs(r.GetAddingReplicas()), joinIDs(r.GetRemovingReplicas()), joinIDs(r.GetReplicas()))
	case "cancelled":
		fmt.Fprintf(g.stdout, "cancelled the reassignment of %s: replicas %s\n", name, joinIDs(r.GetReplicas()))
	default:
		fmt.Fprintf(g.stdout, "reassigned %s: replicas %s\n", name, joinIDs(r.GetReplicas()))
	}
	return nil
}

// reassignmentRow is one move in flight in `depot topic reassign --status`.
type reassignmentRow struct {
	Topic     string  `json:"topic"`
	Partition int32   `json:"partition"`
	Replicas  []int32 `json:"replicas"`
	Target    []int32 `json:"target"`
	Adding    []int32 `json:"adding_replicas"`
	Removing  []int32 `json:"removing_replicas"`
	ISR       []int32 `json:"isr"`
	Leader    int32   `json:"leader"`
	// LeaderLogEnd is -1 when the leader did not answer.
	LeaderLogEnd int64         `json:"leader_log_end_offset"`
	Progress     []progressRow `json:"progress"`
}

// progressRow is how far one added replica has caught up; LogEnd is -1
// when its node did not answer for it.
type progressRow struct {
	Node   int32 `json:"node"`
	LogEnd int64 `json:"log_end_offset"`
	InSync bool  `json:"in_sync"`
}

// reassignStatus prints the moves in flight of topic, or of every topic.
func (g *globals) reassignStatus(ctx context.Context, c *client.Client, topic string) error {
	var topics []string
	if topic != "" {
		topics = []string{topic}
	}
	all, err := c.Reassignments(ctx, topics...)
	if err != nil {
		return err
	}
	rows := []reassignmentRow{}
	for _, r := range all {
		row := reassignmentRow{
			Topic: r.Topic, Partition: r.Partition, Replicas: orEmpty(r.Replicas), Target: orEmpty(r.Target), Adding: orEmpty(r.Adding),
			Removing: orEmpty(r.Removing), ISR: orEmpty(r.ISR), Leader: r.Leader, LeaderLogEnd: r.LeaderLogEnd, Progress: []progressRow{},
		}
		for _, p := range r.Progress {
			row.Progress = append(row.Progress, progressRow{Node: p.Node, LogEnd: p.LogEndOffset, InSync: p.InSync})
		}
		rows = append(rows, row)
	}
	if g.output == "json" {
		return g.printJSON(rows)
	}
	if len(rows) == 0 {
		fmt.Fprintln(g.stdout, "no reassignment in progress")
		return nil
	}
	w := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "TOPIC\tPARTITION\tREPLICAS\tTARGET\tADDING\tREMOVING\tLEADER\tPROGRESS")
	for _, r := range rows {
		fmt.Fprintf(w, "%s\t%d\t%s\t%s\t%s\t%s\t%d\t%s\n", r.Topic, r.Partition, joinIDs(r.Replicas), joinIDs(r.Target),
			joinIDs(r.Adding), joinIDs(r.Removing), r.Leader, progressText(r))
	}
	return w.Flush()
}

// progressText is each added replica's progress, "3: 640/1500 (42%)",
// "3: in sync" or "3: not started", separated by ", ".
func progressText(r reassignmentRow) string {
	if len(r.Progress) == 0 {
		return "-"
	}
	parts := make([]string, len(r.Progress))
	for i, p := range r.Progress {
		switch {
		case p.InSync:
			parts[i] = fmt.Sprintf("%d: in sync", p.Node)
		case p.LogEnd < 0:
			parts[i] = fmt.Sprintf("%d: not started", p.Node)
		case r.LeaderLogEnd <= 0:
			parts[i] = fmt.Sprintf("%d: %d", p.Node, p.LogEnd)
		default:
			parts[i] = fmt.Sprintf("%d: %d/%d (%d%%)", p.Node, p.LogEnd, r.LeaderLogEnd, min(100, 100*p.LogEnd/r.LeaderLogEnd))
		}
	}
	return strings.Join(parts, ", ")
}
