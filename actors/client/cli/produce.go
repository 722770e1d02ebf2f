package cli

import (
	"bufio"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/depot-dev/depot/actors/client"
	"github.com/depot-dev/depot/node"
	"github.com/depot-dev/depot/wire"
)

func newProduceCommand(g *globals) *cobra.Command {
	var (
		keySeparator string
		acksFlag     string
		compression  string
		partition    int32
		partitionOld int32
		maxLine      int
	)
	cmd := &cobra.Command{
		Use:   "produce TOPIC",
		Short: "Produce one record per line of standard input",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			topic := args[0]
			if cmd.Flags().Changed("p") {
				if cmd.Flags().Changed("partition") && partition != partitionOld {
					return node.Usagef("--partition %d and -p %d: give one", partition, partitionOld)
				}
				partition = partitionOld
			}
			acks, err := client.ParseAcks(acksFlag)
			if err != nil {
				return node.Usagef("--acks %s: want 0, 1, -1 or all", acksFlag)
			}
			codec, err := wire.ParseCompression(compression)
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
			if _, err := c.Metadata(ctx, topic); err != nil {
				return err
			}
			opts := []client.ProducerOpt{client.Acks(acks), client.Compression(codec)}
			if partition >= 0 {
				opts = append(opts, client.WithPartitioner(client.ManualPartitioner()))
			}
			p, err := c.NewProducer(opts...)
			if err != nil {
				return err
			}
			defer p.Close()
			started := time.Now()
			var produced, failed, bytes int64
			var firstErr error
			errCh := make(chan error, 1)
			scanner := bufio.NewScanner(g.stdin)
			scanner.Buffer(make([]byte, 64<<10), maxLine)
			for scanner.Scan() {
				line := scanner.Bytes()
				r := &client.Record{Topic: topic, Partition: partition}
				if keySeparator != "" {
					if k, v, ok := strings.Cut(string(line), keySeparator); ok {
						r.Key, r.Value = []byte(k), []byte(v)
					} else {
						r.Value = append([]byte(nil), line...)
					}
				} else {
					r.Value = append([]byte(nil), line...)
				}
				bytes += int64(len(r.Key) + len(r.Value))
				p.Produce(ctx, r, func(_ *client.Record, err error) {
					if err != nil {
						select {
						case errCh <- err:
						default:
						}
					}
				})
				produced++
				select {
				case firstErr = <-errCh:
				default:
				}
				if firstErr != nil {
					break
				}
			}
			if err := scanner.Err(); err != nil && firstErr == nil {
				if errors.Is(err, bufio.ErrTooLong) {
					firstErr = fmt.Errorf("a line is longer than --max-line %d bytes", maxLine)
				} else {
					firstErr = fmt.Errorf("reading standard input: %w", err)
				}
			}
			if err := p.Flush(ctx); err != nil && firstErr == nil {
				firstErr = err
			}
			select {
			case err := <-errCh:
				if firstErr == nil {
					firstErr = err
				}
				failed++
			default:
			}
			elapsed := time.Since(started)
			if firstErr != nil {
				return fmt.Errorf("produce to %s: %w", topic, firstErr)
			}
			fmt.Fprintf(g.stderr, "produced %d records (%d bytes) to %s in %v (%.0f records/s), acks=%s\n",
				produced-failed, bytes, topic, elapsed.Round(time.Millisecond), float64(produced)/elapsed.Seconds(), client.FormatAcks(acks))
			return nil
		},
	}
	cmd.Flags().StringVarP(&keySeparator, "key-separator", "k", "", "split each line into key and value at the first occurrence of this string")
	cmd.Flags().StringVar(&acksFlag, "acks", "all", "acknowledgement: 0 (none waited for), 1 (leader wrote), -1 or all (every in-sync replica, after fsync)")
	cmd.Flags().StringVarP(&compression, "compression", "z", "none", "compression: none, gzip, snappy, lz4, zstd")
	cmd.Flags().Int32Var(&partition, "partition", -1, "produce to this partition (default: by key hash, sticky without a key)")
	// -p was the shorthand of --partition, and is still taken.
	cmd.Flags().Int32VarP(&partitionOld, "p", "p", -1, "")
	_ = cmd.Flags().MarkHidden("p")
	cmd.Flags().IntVar(&maxLine, "max-line", 1<<20, "longest line accepted, in bytes")
	return cmd
}
