// Package cli is the command line of the Depot clients: depot topic,
// produce, consume, group and disks, and the flags they share. Each command
// builds an actor client (actors/client) for the nodes named by --brokers,
// and refuses a malformed command line with a usage error before it
// contacts any node.
package cli

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/spf13/cobra"

	"github.com/depot-dev/depot/actors/client"
	"github.com/depot-dev/depot/node"
)

// AddCommands adds the client commands to root, and to root's persistent
// flags the settings they share: --brokers (env DEPOT_BROKERS; default
// node.DefaultListen, where a node listens by default), -o/--output (text or
// json; default text) and --timeout (default 30 s). The commands read the
// records to produce from stdin and print their results to stdout, and
// summaries and warnings to stderr.
func AddCommands(root *cobra.Command, stdin io.Reader, stdout, stderr io.Writer) {
	addCommands(root, &globals{stdin: stdin, stdout: stdout, stderr: stderr, notify: notifySignals})
}

// addCommands is AddCommands with the globals given.
func addCommands(root *cobra.Command, g *globals) {
	flags := root.PersistentFlags()
	flags.StringVar(&g.brokers, "brokers", envOr("DEPOT_BROKERS", node.DefaultListen), "comma-separated node addresses to contact (env DEPOT_BROKERS)")
	flags.StringVarP(&g.output, "output", "o", "text", "output format: text or json")
	flags.DurationVar(&g.timeout, "timeout", 30*time.Second, "how long to wait for a node's answer")
	root.AddCommand(newTopicCommand(g), newProduceCommand(g), newConsumeCommand(g), newGroupCommand(g), newDisksCommand(g))
}

// globals are the flags every client command takes, and where the commands
// read and write.
type globals struct {
	brokers string
	output  string
	timeout time.Duration
	stdin   io.Reader
	stdout  io.Writer
	stderr  io.Writer
	// notify relays SIGINT and SIGTERM to c until stop is called.
	notify func(c chan<- os.Signal) (stop func())
}

func envOr(name, fallback string) string {
	if v, ok := os.LookupEnv(name); ok {
		return v
	}
	return fallback
}

// client connects to the brokers named by --brokers.
func (g *globals) client() (*client.Client, error) {
	if g.output != "text" && g.output != "json" {
		return nil, node.Usagef("-o %q: want text or json", g.output)
	}
	logger := logrus.New()
	logger.SetOutput(g.stderr)
	logger.SetLevel(logrus.ErrorLevel)
	var brokers []string
	for _, b := range strings.Split(g.brokers, ",") {
		if b = strings.TrimSpace(b); b != "" {
			brokers = append(brokers, b)
		}
	}
	if len(brokers) == 0 {
		return nil, node.Usagef("--brokers names no address")
	}
	return client.New(client.Brokers(brokers...), client.RequestTimeout(g.timeout), client.Logger(logrus.NewEntry(logger)))
}

// withClient runs fn with a client and a context bounded by --timeout.
func (g *globals) withClient(cmd *cobra.Command, fn func(ctx context.Context, c *client.Client) error) error {
	c, err := g.client()
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(cmd.Context(), g.timeout)
	defer cancel()
	return fn(ctx, c)
}

func (g *globals) printJSON(v any) error {
	enc := json.NewEncoder(g.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// notifySignals relays SIGINT and SIGTERM to c until stop is called.
func notifySignals(c chan<- os.Signal) (stop func()) {
	signal.Notify(c, os.Interrupt, syscall.SIGTERM)
	return func() { signal.Stop(c) }
}

// interrupts returns a channel that receives each SIGINT and SIGTERM until
// stop is called.
func (g *globals) interrupts() (signals <-chan os.Signal, stop func()) {
	c := make(chan os.Signal, 2)
	return c, g.notify(c)
}

// signalContext is cancelled by SIGINT or SIGTERM.
func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

// oneLine keeps an error to one line for the terminal.
func oneLine(err error) string {
	return strings.ReplaceAll(strings.TrimSpace(err.Error()), "\n", "; ")
}
