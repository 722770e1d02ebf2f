package cli

import (
	"context"
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/depot-dev/depot/actors/client"
)

func newClusterCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "cluster", Short: "Show the cluster: its nodes and controller quorum"}
	cmd.AddCommand(newClusterInfoCommand(g))
	return cmd
}

// clusterNode is one node in `depot cluster info`.
type clusterNode struct {
	ID           int32  `json:"id"`
	Address      string `json:"address"`
	KafkaAddress string `json:"kafka_address"`
	Rack         string `json:"rack"`
	// State is online (registered and unfenced) or fenced.
	State string `json:"state"`
	Voter bool   `json:"voter"`
}

func newClusterInfoCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "info",
		Short: "Show the cluster's id, its nodes and which node leads the controller quorum",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				info, err := c.ClusterInfo(ctx)
				if err != nil {
					return err
				}
				nodes := []clusterNode{}
				for _, n := range info.GetNodes() {
					state := "online"
					if n.GetFenced() {
						state = "fenced"
					}
					nodes = append(nodes, clusterNode{ID: n.GetNodeId(), Address: n.GetAddress(), KafkaAddress: n.GetKafkaAddress(), Rack: n.GetRack(), State: state, Voter: n.GetVoter()})
				}
				if g.output == "json" {
					return g.printJSON(map[string]any{"cluster_id": info.GetClusterId(), "controller_leader": info.GetControllerLeader(), "nodes": nodes})
				}
				leader := "none"
				if id := info.GetControllerLeader(); id >= 0 {
					leader = fmt.Sprint(id)
				}
				fmt.Fprintf(g.stdout, "CLUSTER     %s\nCONTROLLER  %s (term %d, committed %d)\n\n", info.GetClusterId(), leader, info.GetTerm(), info.GetCommitted())
				w := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(w, "NODE\tADDRESS\tRACK\tSTATE\tROLE")
				for _, n := range nodes {
					role := "broker"
					if n.Voter {
						role = "broker, voter"
					}
					rack := n.Rack
					if rack == "" {
						rack = "-"
					}
					fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\n", n.ID, n.Address, rack, n.State, role)
				}
				return w.Flush()
			})
		},
	}
}
