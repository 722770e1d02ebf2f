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
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/depot-dev/depot/actors/client/cli"
	"github.com/depot-dev/depot/bench"
	"github.com/depot-dev/depot/node"
)

// Exit statuses of the depot command, besides 0 for success.
const (
	exitFailure     = 1   // the work asked for failed
	exitUsage       = 2   // the command line is malformed
	exitInterrupted = 130 // interrupted before its work was done (128 + SIGINT, as a shell reports it)
)

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
	// The root runs nothing itself: the one error it returns unmarked is
	// cobra's unknown command.
	if cmd == root || node.IsUsage(err) {
		return exitUsage
	}
	if errors.Is(err, node.ErrInterrupted) {
		return exitInterrupted
	}
	return exitFailure
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
	// A flag that does not parse and arguments that a command does not take
	// are usage errors, whichever command they are given to. The completion command is
	// added now rather than on Execute, so that its arguments are checked the
	// same way.
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return node.MarkUsage(err) })
	root.InitDefaultCompletionCmd()
	markArgErrors(root)
	return root
}

// markArgErrors makes the argument check of cmd, and of every command below
// it, return its error as a usage error.
func markArgErrors(cmd *cobra.Command) {
	if check := cmd.Args; check != nil {
		cmd.Args = func(cmd *cobra.Command, args []string) error { return node.MarkUsage(check(cmd, args)) }
	}
	for _, sub := range cmd.Commands() {
		markArgErrors(sub)
	}
}
