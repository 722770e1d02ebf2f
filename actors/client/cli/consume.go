package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/depot-dev/depot/actors/client"
	"github.com/depot-dev/depot/node"
)

func newConsumeCommand(g *globals) *cobra.Command {
	var (
		offset     string
		count      int
		format     string
		partitions []int32
		oldList    []int32
		group      string
		resetFlag  string
	)
	cmd := &cobra.Command{
		Use:   "consume TOPIC",
		Short: "Print a topic's records, one per line (with -g, as a member of a consumer group)",
		Long: `Print a topic's records, one per line (with -g, as a member of a consumer group).

Records are printed as --format says, or with -o json as one JSON object a
line: topic, partition, offset, timestamp (ms), key and value (strings, or
null), headers.

An --offset past the end of a partition moves as --reset says (Kafka's
auto.offset.reset): to the end (latest, the default, as Kafka's console
consumer does), to the log start (earliest), or not at all (none: consume
fails with OFFSET_OUT_OF_RANGE). An offset below the log start, whose
records were deleted, starts at the log start. Each move is told on
standard error.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			topic := args[0]
			partitions = append(partitions, oldList...)
			if count < 0 {
				return node.Usagef("-n %d: want a positive count, or 0 for no limit", count)
			}
			write, err := recordWriter(g, cmd, format)
			if err != nil {
				return err
			}
			if cmd.Flags().Changed("group") {
				if cmd.Flags().Changed("reset") {
					return node.Usagef("--reset cannot be used with -g: --offset (start or end) says where partitions with no committed offset, or one out of range, start")
				}
				return consumeGroup(g, topic, group, offset, count, write, partitions)
			}
			at, err := parseOffset(offset)
			if err != nil {
				return node.MarkUsage(err)
			}
			reset, err := client.ParseResetPolicy(resetFlag)
			if err != nil {
				return node.Usagef("--reset %s: want earliest, latest or none", resetFlag)
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			defer c.Close()
			ctx, stop := g.signalContext()
			defer stop()
			t, err := describeTopic(ctx, c, topic)
			if err != nil {
				return err
			}
			// Resets and fetch errors are told from the consumer's
			// goroutine, and by nothing else.
			consumer, err := c.NewConsumer(client.Reset(reset), client.OnOffsetReset(resetReporter(g.stderr)),
				client.OnFetchError(fetchWarner(g.stderr, fetchWarnEvery, time.Now)))
			if err != nil {
				return err
			}
			defer consumer.Close()
			if len(partitions) == 0 {
				consumer.AssignTopic(topic, at)
			} else {
				n := int32(len(t.Partitions))
				for _, p := range partitions {
					if p < 0 || p >= n {
						return node.Usagef("--partition %d: topic %s has partitions 0 to %d", p, topic, n-1)
					}
					consumer.Assign(topic, p, at)
				}
			}
			out := bufio.NewWriter(g.stdout)
			defer out.Flush()
			printed := 0
			for count == 0 || printed < count {
				records, err := consumer.Poll(ctx)
				if err != nil {
					if ctx.Err() != nil {
						return nil
					}
					if errors.Is(err, client.ErrOffsetOutOfRange) {
						return fmt.Errorf("consume %s with --reset none: %w", topic, err)
					}
					return err
				}
				for _, r := range records {
					write(out, r)
					printed++
					if count > 0 && printed >= count {
						break
					}
				}
				if err := out.Flush(); err != nil {
					return err
				}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&offset, "offset", "start", "where to start: start, end, an offset, or @UNIX_MS for a timestamp")
	cmd.Flags().StringVar(&resetFlag, "reset", "latest", "where an --offset past the end moves: latest (the end), earliest (the log start), or none (fail)")
	cmd.Flags().IntVarP(&count, "num", "n", 0, "stop after this many records (0: run until interrupted)")
	cmd.Flags().StringVarP(&format, "format", "f", "%v\\n", "output format: %v value, %k key, %p partition, %o offset, %t topic, %d timestamp (ms), %h headers; \\n, \\t")
	cmd.Flags().Int32SliceVar(&partitions, "partition", nil, "read only these partitions: a `list` such as 0,2, or the flag repeated (default: all)")
	cmd.Flags().Lookup("partition").DefValue = "" // not "[]"
	// -p and --partitions were its name before --partition, which
	// topic create's -p/--partitions (a count) made ambiguous.
	cmd.Flags().Int32SliceVarP(&oldList, "partitions", "p", nil, "")
	_ = cmd.Flags().MarkHidden("partitions")
	cmd.Flags().StringVarP(&group, "group", "g", "", "consume as a member of this consumer group: the group assigns partitions, and printed records are committed; --offset (start or end) is where partitions with no committed offset start")
	return cmd
}

func parseOffset(s string) (client.Offset, error) {
	switch {
	case s == "start" || s == "earliest":
		return client.AtStart(), nil
	case s == "end" || s == "latest":
		return client.AtEnd(), nil
	case strings.HasPrefix(s, "@"):
		ms, err := strconv.ParseInt(s[1:], 10, 64)
		if err != nil || ms < 0 {
			return client.Offset{}, fmt.Errorf("--offset %q: want @ and a Unix time in milliseconds", s)
		}
		return client.AtTimestamp(time.UnixMilli(ms)), nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return client.Offset{}, fmt.Errorf("--offset %q: want start, end, a non-negative offset or @UNIX_MS", s)
	}
	return client.AtOffset(n), nil
}

// recordWriter returns what writes each record: as format says, or as a
// line of JSON with -o json (format then not given).
func recordWriter(g *globals, cmd *cobra.Command, format string) (func(w *bufio.Writer, r *client.Record), error) {
	if g.output != "json" {
		var line []byte
		return func(w *bufio.Writer, r *client.Record) {
			line = formatRecord(line[:0], format, r)
			w.Write(line)
		}, nil
	}
	if cmd.Flags().Changed("format") {
		return nil, node.Usagef("-f and -o json: give one")
	}
	return func(w *bufio.Writer, r *client.Record) {
		line, _ := json.Marshal(newJSONRecord(r)) // strings and numbers only
		w.Write(line)
		w.WriteByte('\n')
	}, nil
}

// jsonRecord is a record as consume -o json prints it.
type jsonRecord struct {
	Topic     string       `json:"topic"`
	Partition int32        `json:"partition"`
	Offset    int64        `json:"offset"`
	Timestamp int64        `json:"timestamp"`
	Key       *string      `json:"key"`
	Value     *string      `json:"value"`
	Headers   []jsonHeader `json:"headers,omitempty"`
}

type jsonHeader struct {
	Key   string  `json:"key"`
	Value *string `json:"value"`
}

func newJSONRecord(r *client.Record) jsonRecord {
	j := jsonRecord{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Timestamp: r.Timestamp.UnixMilli(), Key: jsonBytes(r.Key), Value: jsonBytes(r.Value)}
	for _, h := range r.Headers {
		j.Headers = append(j.Headers, jsonHeader{Key: h.Key, Value: jsonBytes(h.Value)})
	}
	return j
}

// jsonBytes is b as a JSON string, or null for nil.
func jsonBytes(b []byte) *string {
	if b == nil {
		return nil
	}
	s := string(b)
	return &s
}

// resetReporter returns an OnOffsetReset callback that says on w, in one
// line, where a partition's offset moved and why. The consumer calls it
// from its own goroutine; w is written by nothing else while it runs.
func resetReporter(w io.Writer) func(client.OffsetReset) {
	return func(r client.OffsetReset) {
		fmt.Fprintln(w, formatReset(r))
	}
}

// fetchWarnEvery is how often, at most, consume warns of each partition
// it cannot read.
const fetchWarnEvery = 5 * time.Second

// fetchWarner returns an OnFetchError callback that warns on w, in one
// line, of a partition that cannot be read and is being retried: at its
// first failure, and then at most once every interval while it fails, by
// the clock now, so that a consumer never waits in silence nor floods the
// terminal. A failure after the interval has passed warns again. The
// consumer calls it from its own goroutine.
func fetchWarner(w io.Writer, every time.Duration, now func() time.Time) func(client.FetchError) {
	var mu sync.Mutex
	last := map[client.TopicPartition]time.Time{}
	return func(e client.FetchError) {
		tp := client.TopicPartition{Topic: e.Topic, Partition: e.Partition}
		t := now()
		mu.Lock()
		at, warned := last[tp]
		if warned && t.Sub(at) < every {
			mu.Unlock()
			return
		}
		last[tp] = t
		mu.Unlock()
		fmt.Fprintln(w, formatFetchError(e))
	}
}

// formatFetchError says which partition cannot be read, and why.
func formatFetchError(e client.FetchError) string {
	where := ""
	if e.Offset >= 0 {
		where = fmt.Sprintf(" at offset %d", e.Offset)
	}
	return fmt.Sprintf("depot: warning: cannot read %s partition %d%s, retrying: %s", e.Topic, e.Partition, where, oneLine(e.Err))
}

// formatReset says where a partition's offset moved and why.
func formatReset(r client.OffsetReset) string {
	why := fmt.Sprintf("past the end (%d), --reset %s", r.HighWatermark, r.Policy)
	if r.BelowLogStart() {
		why = fmt.Sprintf("below the log start (%d): the records before it were deleted", r.LogStartOffset)
	}
	return fmt.Sprintf("depot: reset %s partition %d from offset %d to %d: %s", r.Topic, r.Partition, r.From, r.To, why)
}

// formatRecord appends r to dst as format says (rpk's verbs).
func formatRecord(dst []byte, format string, r *client.Record) []byte {
	for i := 0; i < len(format); i++ {
		c := format[i]
		if (c != '%' && c != '\\') || i+1 == len(format) {
			dst = append(dst, c)
			continue
		}
		i++
		switch v := format[i]; {
		case c == '\\' && v == 'n':
			dst = append(dst, '\n')
		case c == '\\' && v == 't':
			dst = append(dst, '\t')
		case c == '\\':
			dst = append(dst, '\\', v)
		case v == 'v':
			dst = append(dst, r.Value...)
		case v == 'k':
			dst = append(dst, r.Key...)
		case v == 'p':
			dst = strconv.AppendInt(dst, int64(r.Partition), 10)
		case v == 'o':
			dst = strconv.AppendInt(dst, r.Offset, 10)
		case v == 't':
			dst = append(dst, r.Topic...)
		case v == 'd':
			dst = strconv.AppendInt(dst, r.Timestamp.UnixMilli(), 10)
		case v == 'h':
			for j, h := range r.Headers {
				if j > 0 {
					dst = append(dst, ',')
				}
				dst = append(dst, h.Key...)
				dst = append(dst, '=')
				dst = append(dst, h.Value...)
			}
		case v == '%':
			dst = append(dst, '%')
		default:
			dst = append(dst, '%', v)
		}
	}
	return dst
}

// groupCommitInterval is how often `depot consume -g` commits what it has
// printed.
const groupCommitInterval = 5 * time.Second

// consumeGroup prints topic's records as a member of group and commits the
// position after each record printed (never one not yet written out): every
// groupCommitInterval, when the group takes partitions away, and on exit.
func consumeGroup(g *globals, topic, group, offset string, count int, write func(*bufio.Writer, *client.Record), partitions []int32) error {
	if group == "" {
		return node.Usagef("-g: empty group id")
	}
	if len(partitions) > 0 {
		return node.Usagef("--partition cannot be used with -g: the group assigns the partitions")
	}
	var reset client.ResetPolicy
	switch offset {
	case "start", "earliest":
		reset = client.ResetEarliest
	case "end", "latest":
		reset = client.ResetLatest
	default:
		return node.Usagef("--offset %q: with -g, want start or end (where partitions with no committed offset start)", offset)
	}
	c, err := g.client()
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, stop := g.signalContext()
	defer stop()
	if _, err := describeTopic(ctx, c, topic); err != nil {
		return err
	}
	// Resets are told from the consumer's goroutine, the rest from this one.
	stderr := &lockedWriter{w: g.stderr}
	printed := map[client.TopicPartition]int64{} // next offset after each record written out
	var gc *client.GroupConsumer
	commitRevoked := func(ctx context.Context, tps []client.TopicPartition) {
		offsets := map[client.TopicPartition]int64{}
		for _, tp := range tps {
			if next, ok := printed[tp]; ok {
				offsets[tp] = next
			}
		}
		if err := gc.CommitOffsets(ctx, offsets); err != nil {
			fmt.Fprintf(stderr, "depot: commit revoked partitions: %v\n", oneLine(err))
		}
		for _, tp := range tps {
			delete(printed, tp)
		}
	}
	gc, err = c.NewGroupConsumer(group, []string{topic}, client.ResetOffset(reset), client.AutoCommit(0), client.OnRevoked(commitRevoked),
		client.OnOffsetReset(resetReporter(stderr)), client.OnFetchError(fetchWarner(stderr, fetchWarnEvery, time.Now)))
	if err != nil {
		return err
	}
	defer gc.Close()
	out := bufio.NewWriter(g.stdout)
	defer out.Flush()
	total := 0
	lastCommit := time.Now()
	var pollErr error
	for count == 0 || total < count {
		records, err := gc.Poll(ctx)
		if err != nil {
			if ctx.Err() == nil {
				pollErr = err
			}
			break
		}
		done := map[client.TopicPartition]int64{}
		for _, r := range records {
			write(out, r)
			done[client.TopicPartition{Topic: r.Topic, Partition: r.Partition}] = r.Offset + 1
			total++
			if count > 0 && total >= count {
				break
			}
		}
		if err := out.Flush(); err != nil {
			return err
		}
		maps.Copy(printed, done)
		if time.Since(lastCommit) >= groupCommitInterval {
			lastCommit = time.Now()
			if err := gc.CommitOffsets(ctx, printed); err != nil && ctx.Err() == nil {
				fmt.Fprintf(stderr, "depot: commit: %v\n", oneLine(err))
			}
		}
	}
	commitCtx, cancel := context.WithTimeout(context.Background(), g.timeout)
	defer cancel()
	if err := gc.CommitOffsets(commitCtx, printed); err != nil {
		return errors.Join(pollErr, fmt.Errorf("commit offsets of group %s: %w", group, err))
	}
	return pollErr
}

// lockedWriter serialises the writes of several goroutines to w.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
