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
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/depot-dev/depot/actors/client/cli"
	"github.com/depot-dev/depot/bench"
	"github.com/depot-dev/depot/internal/usage"
	"github.com/depot-dev/depot/node"
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

func newRootCommand(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "depot",
		Short:         "Depot: a distributed commit log in the model of Kafka",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	cli.AddCommands(root, stdin, stdout, stderr)
	root.AddCommand(node.NewCommand(stderr), bench.NewCommand(stdout, stderr))
	return root
}
