package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/depot-dev/depot/actors/client"
	"github.com/depot-dev/depot/messages"
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
	)
	cmd := &cobra.Command{
		Use:   "consume TOPIC",
		Short: "Print a topic's records, one per line (with -g, as a member of a consumer group)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			topic := args[0]
			partitions = append(partitions, oldList...)
			if count < 0 {
				return node.Usagef("-n %d: want a positive count, or 0 for no limit", count)
			}
			if cmd.Flags().Changed("group") {
				return consumeGroup(g, topic, group, offset, count, format, partitions)
			}
			at, err := parseOffset(offset)
			if err != nil {
				return node.MarkUsage(err)
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			defer c.Close()
			ctx, stop := signalContext()
			defer stop()
			md, err := c.Metadata(ctx, topic)
			if err != nil {
				return err
			}
			if len(md.Topics) != 1 || md.Topics[0].Error != messages.ErrorCode_NONE {
				return fmt.Errorf("unknown topic %s", topic)
			}
			consumer, err := c.NewConsumer()
			if err != nil {
				return err
			}
			defer consumer.Close()
			if len(partitions) == 0 {
				consumer.AssignTopic(topic, at)
			} else {
				n := int32(len(md.Topics[0].Partitions))
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
			var line []byte
			for count == 0 || printed < count {
				records, err := consumer.Poll(ctx)
				if err != nil {
					if ctx.Err() != nil {
						return nil
					}
					return err
				}
				for _, r := range records {
					line = formatRecord(line[:0], format, r)
					out.Write(line)
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
func consumeGroup(g *globals, topic, group, offset string, count int, format string, partitions []int32) error {
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
	ctx, stop := signalContext()
	defer stop()
	md, err := c.Metadata(ctx, topic)
	if err != nil {
		return err
	}
	if len(md.Topics) != 1 || md.Topics[0].Error != messages.ErrorCode_NONE {
		return fmt.Errorf("unknown topic %s", topic)
	}
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
			fmt.Fprintf(g.stderr, "depot: commit revoked partitions: %v\n", oneLine(err))
		}
		for _, tp := range tps {
			delete(printed, tp)
		}
	}
	gc, err = c.NewGroupConsumer(group, []string{topic}, client.ResetOffset(reset), client.AutoCommit(0), client.OnRevoked(commitRevoked))
	if err != nil {
		return err
	}
	defer gc.Close()
	out := bufio.NewWriter(g.stdout)
	defer out.Flush()
	total := 0
	lastCommit := time.Now()
	var line []byte
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
			line = formatRecord(line[:0], format, r)
			out.Write(line)
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
				fmt.Fprintf(g.stderr, "depot: commit: %v\n", oneLine(err))
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
