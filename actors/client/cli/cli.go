// Package cli is the command line of the Depot clients: depot topic,
// produce, consume, group, disks and cluster, and the flags they share. Each command
// builds an actor client (actors/client) for the nodes named by --brokers,
// and refuses a malformed command line with a usage error before it
// contacts any node.
package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/spf13/cobra"

	"github.com/depot-dev/depot/actors/client"
	"github.com/depot-dev/depot/messages"
	"github.com/depot-dev/depot/node"
)

// AddCommands adds the client commands to root, and to root's persistent
// flags the settings they share: --brokers (env DEPOT_BROKERS; default
// node.DefaultListen, where a node listens by default), -o/--output (text or
// json; default text) and --timeout (default 30 s). The commands read the
// records to produce from stdin and print their results to stdout, and
// summaries and warnings to stderr. The error a command returns reads as
// one statement of what is wrong (see present).
func AddCommands(root *cobra.Command, stdin io.Reader, stdout, stderr io.Writer) {
	addCommands(root, &globals{stdin: stdin, stdout: stdout, stderr: stderr, notify: notifySignals})
}

// addCommands is AddCommands with the globals given.
func addCommands(root *cobra.Command, g *globals) {
	flags := root.PersistentFlags()
	flags.StringVar(&g.brokers, "brokers", envOr("DEPOT_BROKERS", node.DefaultListen), "comma-separated node addresses to contact (env DEPOT_BROKERS)")
	flags.StringVarP(&g.output, "output", "o", "text", "output format: text or json")
	flags.DurationVar(&g.timeout, "timeout", 30*time.Second, "how long to wait for a node's answer")
	for _, cmd := range []*cobra.Command{newTopicCommand(g), newProduceCommand(g), newConsumeCommand(g), newGroupCommand(g), newDisksCommand(g), newClusterCommand(g)} {
		g.presentErrors(cmd)
		root.AddCommand(cmd)
	}
}

// presentErrors makes cmd, and every command below it, return its error as
// present words it.
func (g *globals) presentErrors(cmd *cobra.Command) {
	if run := cmd.RunE; run != nil {
		cmd.RunE = func(cmd *cobra.Command, args []string) error { return g.present(run(cmd, args)) }
	}
	for _, sub := range cmd.Commands() {
		g.presentErrors(sub)
	}
}

// presented is an error as the CLI words it. It unwraps to the error it
// words, so errors.Is and node.IsUsage see through it.
type presented struct {
	text string
	err  error
}

func (p *presented) Error() string { return p.text }
func (p *presented) Unwrap() error { return p.err }

// statementf is an error the CLI words itself, complete as it is, standing
// for err (which may be nil): present leaves its text alone.
func statementf(err error, format string, args ...any) error {
	return &presented{text: fmt.Sprintf(format, args...), err: err}
}

// present words err for the terminal, on one line:
//   - a usage error, or a statement the CLI made, as it is;
//   - a broker's answer as its message alone: the message names what it is
//     about, so the context the client and the command wrapped around it
//     would only say it again;
//   - no node answering, and no answer within --timeout, as such, with the
//     addresses tried;
//   - anything else with its Go package prefixes ("client: ") left out.
//
// Errors joined with errors.Join are each worded, and joined with "; ".
func (g *globals) present(err error) error {
	if _, ok := err.(*presented); ok || err == nil || node.IsUsage(err) {
		return err
	}
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		var texts []string
		for _, e := range joined.Unwrap() {
			if e != nil {
				texts = append(texts, g.present(e).Error())
			}
		}
		return &presented{text: strings.Join(texts, "; "), err: err}
	}
	return &presented{text: oneLine(errors.New(g.presentText(err))), err: err}
}

// presentText is the text of err as present words it.
func (g *globals) presentText(err error) string {
	var broker *client.Error
	text := err.Error()
	switch {
	case errors.As(err, &broker) && broker.Message != "" && strings.HasSuffix(text, broker.Message):
		return messages.CleanErrorText(broker.Message)
	case errors.Is(err, client.ErrUnreachable):
		addrs := after(err, client.ErrUnreachable)
		if addrs == "" {
			addrs = g.brokers
		}
		return fmt.Sprintf("no node answered at %s: is depot node running there?", addrs)
	case errors.Is(err, client.ErrTimeout):
		// "client: request timed out: *messages.X to ADDR after D"
		if to, ok := strings.CutPrefix(after(err, client.ErrTimeout), "*"); ok {
			if _, rest, ok := strings.Cut(to, " to "); ok {
				if addr, d, ok := strings.Cut(rest, " after "); ok {
					return fmt.Sprintf("no answer from %s within %s", addr, d)
				}
			}
		}
	case errors.Is(err, context.DeadlineExceeded):
		addrs := g.node
		if addrs == "" {
			addrs = g.brokers
		}
		return fmt.Sprintf("no answer from %s within %v (--timeout)", addrs, g.timeout)
	}
	return messages.ErrorText(err)
}

// after is the detail that the error in err's chain that wraps sentinel
// puts after it ("client: node unreachable: ADDRS" gives "ADDRS").
func after(err, sentinel error) string {
	for e := err; e != nil; e = errors.Unwrap(e) {
		if errors.Unwrap(e) == sentinel {
			return strings.TrimPrefix(e.Error(), sentinel.Error()+": ")
		}
	}
	return ""
}

// globals are the flags every client command takes, and where the commands
// read and write.
type globals struct {
	brokers string
	// node is the address of the one node a command acts on (disks
	// --node), empty when it acts on the cluster through brokers.
	node    string
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

// signalContext is cancelled by the first SIGINT or SIGTERM (as notify
// relays them), or by stop.
func (g *globals) signalContext() (ctx context.Context, stop context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	signals, stopSignals := g.interrupts()
	go func() {
		select {
		case <-signals:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, func() {
		stopSignals()
		cancel()
	}
}

// oneLine keeps an error to one line for the terminal.
func oneLine(err error) string {
	return strings.ReplaceAll(strings.TrimSpace(err.Error()), "\n", "; ")
}
