package cli

import (
	"context"
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/depot-dev/depot/actors/client"
	"github.com/depot-dev/depot/messages"
)

// newTopicElectLeadersCommand is `depot topic elect-leaders`, Kafka's
// kafka-leader-election.sh --election-type preferred.
func newTopicElectLeadersCommand(g *globals) *cobra.Command {
	var partitions []int32
	cmd := &cobra.Command{
		Use:   "elect-leaders [TOPIC]",
		Short: "Make each partition's preferred replica its leader again where it can lead",
		Long: "Each partition's preferred replica is the first of its replicas. Where it is live and in the\n" +
			"ISR and does not lead, it becomes the leader in a new leader epoch. Without TOPIC, every\n" +
			"topic's partitions; with --partition, only those.",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			topic := ""
			if len(args) == 1 {
				topic = args[0]
			}
			return g.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				results, err := c.ElectLeaders(ctx, topic, partitions...)
				if err != nil {
					return err
				}
				type row struct {
					Topic     string `json:"topic"`
					Partition int32  `json:"partition"`
					Leader    int32  `json:"leader"`
					Outcome   string `json:"outcome"`
					Reason    string `json:"reason,omitempty"`
				}
				rows := []row{}
				for _, r := range results {
					outcome := "elected"
					switch r.GetError() {
					case messages.ErrorCode_NONE:
					case messages.ErrorCode_ELECTION_NOT_NEEDED:
						outcome = "already leads"
					default:
						outcome = r.GetError().String()
					}
					rows = append(rows, row{Topic: r.GetTopic(), Partition: r.GetPartition(), Leader: r.GetLeader(), Outcome: outcome, Reason: r.GetErrorMessage()})
				}
				if g.output == "json" {
					return g.printJSON(rows)
				}
				w := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(w, "TOPIC\tPARTITION\tLEADER\tOUTCOME")
				for _, r := range rows {
					fmt.Fprintf(w, "%s\t%d\t%d\t%s\n", r.Topic, r.Partition, r.Leader, r.Outcome)
				}
				return w.Flush()
			})
		},
	}
	cmd.Flags().Int32SliceVar(&partitions, "partition", nil, "only these partitions of TOPIC; repeatable or comma-separated")
	return cmd
}
