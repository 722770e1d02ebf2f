package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/depot-dev/depot/actors/client"
	"github.com/depot-dev/depot/messages"
	"github.com/depot-dev/depot/node"
	"github.com/depot-dev/depot/wire"
)

func newProduceCommand(g *globals) *cobra.Command {
	var (
		keySeparator    string
		acksFlag        string
		compression     string
		partition       int32
		partitionOld    int32
		maxLine         int
		deliveryTimeout time.Duration
	)
	cmd := &cobra.Command{
		Use:   "produce TOPIC",
		Short: "Produce one record per line of standard input",
		Long: `Produce one record per line of standard input.

Each record may wait --delivery-timeout to be acknowledged, retries
included (Kafka's delivery.timeout.ms), and each request within it
--timeout. A batch refused for a reason that passes (its partition's
leader moved or is being elected, too few replicas in sync, the connection
to its node lost) is sent again until then, to the leader the cluster
names; the producer's id and sequence numbers keep a batch sent twice from
being written twice. Produce exits with status 0 when every record was
acknowledged. At the first record that fails for good or times out, it
reads no more input, gives up on the records not yet acknowledged (those
already sent may have been written), prints how many were acknowledged
and which input lines were not, and exits with status 1.

Interrupted (Ctrl-C, SIGTERM), it reads no more input and waits for the
records already read to be acknowledged (interrupt again to give up on
them), prints the same counts, and exits with status 130.`,
		Args: cobra.ExactArgs(1),
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
			if deliveryTimeout <= 0 {
				return node.Usagef("--delivery-timeout %v: want a positive duration", deliveryTimeout)
			}
			if maxLine <= 0 {
				return node.Usagef("--max-line %d: want a positive size", maxLine)
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			defer c.Close()
			// Until input is read, an interrupt ends the command as the
			// signal would any program: there is nothing to report.
			if err := checkProduceTarget(context.Background(), c, topic, partition); err != nil {
				return err
			}
			opts := []client.ProducerOpt{client.Acks(acks), client.Compression(codec), client.DeliveryTimeout(deliveryTimeout)}
			if partition >= 0 {
				opts = append(opts, client.WithPartitioner(client.ManualPartitioner()))
			}
			p, err := c.NewProducer(opts...)
			if err != nil {
				return err
			}
			defer p.Close()
			interrupts, stopSignals := g.interrupts()
			defer stopSignals()
			run := &produceRun{
				g: g, topic: topic, partition: partition, keySeparator: keySeparator,
				maxLine: maxLine, interrupts: interrupts, producer: p,
			}
			return run.run(acks)
		},
	}
	cmd.Flags().StringVarP(&keySeparator, "key-separator", "k", "", "split each line into key and value at the first occurrence of this string")
	cmd.Flags().StringVar(&acksFlag, "acks", "all", "acknowledgement: 0 (none waited for), 1 (leader wrote), -1 or all (every in-sync replica, after fsync)")
	cmd.Flags().StringVarP(&compression, "compression", "z", "none", "compression: none, gzip, snappy, lz4, zstd")
	cmd.Flags().Int32Var(&partition, "partition", -1, "produce to this partition; -1 partitions by key hash, sticky without a key")
	// -p was the shorthand of --partition, and is still taken.
	cmd.Flags().Int32VarP(&partitionOld, "p", "p", -1, "")
	_ = cmd.Flags().MarkHidden("p")
	cmd.Flags().IntVar(&maxLine, "max-line", 1<<20, "longest line accepted, in bytes")
	cmd.Flags().DurationVar(&deliveryTimeout, "delivery-timeout", 2*time.Minute, "how long each record may wait to be acknowledged, retries included; --timeout bounds each request within it")
	return cmd
}

// checkProduceTarget refuses, before any input is read, a topic that does
// not exist and a partition it does not have.
func checkProduceTarget(ctx context.Context, c *client.Client, topic string, partition int32) error {
	md, err := c.Metadata(ctx, topic)
	if err != nil {
		return err
	}
	for _, t := range md.GetTopics() {
		if t.GetName() != topic {
			continue
		}
		if t.GetError() != messages.ErrorCode_NONE {
			return fmt.Errorf("produce to %s: %w", topic, &client.Error{Code: t.GetError(), Message: t.GetErrorMessage()})
		}
		if n := int32(len(t.GetPartitions())); partition >= n {
			return node.Usagef("--partition %d: topic %s has partitions 0 to %d", partition, topic, n-1)
		}
	}
	return nil
}

// produceRun is one run of depot produce: it reads records from stdin and
// produces them, and counts what its producer acknowledges.
type produceRun struct {
	g            *globals
	topic        string
	partition    int32
	keySeparator string
	maxLine      int
	interrupts   <-chan os.Signal
	producer     *client.Producer

	tally tally
}

// tally counts records by their promises, which the producer's sender
// calls from its own goroutine.
type tally struct {
	acked atomic.Int64
	bytes atomic.Int64

	mu sync.Mutex
	// failed counts the records not acknowledged, and firstLine and
	// lastLine are the lowest and highest of their input lines.
	failed              int64
	firstLine, lastLine int64
	// firstErr is the first error that was not the command's own
	// giving up (context.Canceled from Produce, client.ErrClosed from
	// Shutdown); failure is closed when it is set.
	firstErr error
	failure  chan struct{}
}

// promise counts the record read from input line line.
func (t *tally) promise(line int64, size int) func(*client.Record, error) {
	return func(_ *client.Record, err error) {
		if err == nil {
			t.acked.Add(1)
			t.bytes.Add(int64(size))
			return
		}
		t.mu.Lock()
		defer t.mu.Unlock()
		if t.failed == 0 {
			t.firstLine, t.lastLine = line, line
		}
		t.failed++
		t.firstLine, t.lastLine = min(t.firstLine, line), max(t.lastLine, line)
		if t.firstErr == nil && !errors.Is(err, context.Canceled) && !errors.Is(err, client.ErrClosed) {
			t.firstErr = err
			close(t.failure)
		}
	}
}

// summary says what was acknowledged of the produced lines, and where the
// input was left when it was not read to its end.
func (t *tally) summary(produced int64, readAll bool) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "%d records acknowledged, %d not acknowledged", t.acked.Load(), produced-t.acked.Load())
	if t.failed > 0 {
		fmt.Fprintf(&b, " (first line %d, last line %d)", t.firstLine, t.lastLine)
	}
	if !readAll {
		fmt.Fprintf(&b, "; input after line %d not produced", produced)
	}
	return b.String()
}

func (r *produceRun) run(acks int) error {
	r.tally.failure = make(chan struct{})
	p := r.producer
	// reading ends at the first failure or interrupt; waiting, for the
	// records already produced, ends at the first failure or a second
	// interrupt.
	reading, stopReading := context.WithCancel(context.Background())
	defer stopReading()
	waiting, giveUp := context.WithCancel(context.Background())
	defer giveUp()
	var interrupted atomic.Bool
	go func() {
		for n := 0; ; n++ {
			select {
			case <-r.interrupts:
				interrupted.Store(true)
				stopReading()
				if n > 0 {
					giveUp()
					return
				}
			case <-r.tally.failure:
				stopReading()
				giveUp()
				return
			case <-waiting.Done():
				return
			}
		}
	}()

	started := time.Now()
	// Unbuffered, so that input is read only once what was read before
	// is being produced.
	batches := make(chan inputBatch)
	go readInput(r.g.stdin, r.maxLine, r.record, batches, reading.Done())
	var produced int64
	readAll := false
	var inputErr error
read:
	for {
		var b inputBatch
		var ok bool
		select {
		case b, ok = <-batches:
		case <-reading.Done():
			break read
		}
		if !ok {
			readAll = true
			break
		}
		for _, rec := range b.records {
			if reading.Err() != nil {
				break read
			}
			produced++
			p.Produce(reading, rec, r.tally.promise(produced, len(rec.Key)+len(rec.Value)))
		}
		if b.err != nil {
			inputErr = b.err
			break
		}
	}
	if interrupted.Load() && produced > r.tally.acked.Load() && waiting.Err() == nil {
		fmt.Fprintf(r.g.stderr, "depot: interrupted; waiting for %d records to be acknowledged (interrupt again to give up on them)\n", produced-r.tally.acked.Load())
	}
	// Shutdown returns once every record's promise has been called, so
	// that the tally is complete.
	_ = p.Shutdown(waiting)
	elapsed := time.Since(started)

	summary := r.tally.summary(produced, readAll)
	r.tally.mu.Lock()
	firstErr := r.tally.firstErr
	r.tally.mu.Unlock()
	switch {
	case interrupted.Load():
		return fmt.Errorf("produce to %s %w: %s", r.topic, node.ErrInterrupted, summary)
	case inputErr != nil:
		return fmt.Errorf("produce to %s: %w: %s", r.topic, inputErr, summary)
	case firstErr != nil:
		return fmt.Errorf("produce to %s: %s: %w", r.topic, summary, firstErr)
	}
	fmt.Fprintf(r.g.stderr, "produced %d records (%d bytes) to %s in %v (%.0f records/s), acks=%s\n",
		produced, r.tally.bytes.Load(), r.topic, elapsed.Round(time.Millisecond), float64(produced)/elapsed.Seconds(), client.FormatAcks(acks))
	return nil
}

// record makes the record of an input line.
func (r *produceRun) record(line []byte) *client.Record {
	rec := &client.Record{Topic: r.topic, Partition: r.partition}
	if r.keySeparator != "" {
		if k, v, ok := strings.Cut(string(line), r.keySeparator); ok {
			rec.Key, rec.Value = []byte(k), []byte(v)
			return rec
		}
	}
	rec.Value = append([]byte(nil), line...)
	return rec
}

// inputBatch is records read from consecutive input lines; err, in the
// last batch, is why reading stopped before the end of the input.
type inputBatch struct {
	records []*client.Record
	err     error
}

// inputBatchLines bounds the records of an inputBatch.
const inputBatchLines = 512

// errStopped ends readInput's scan when its reader is no longer wanted.
var errStopped = errors.New("input no longer read")

// readInput reads a record per line of in (bufio.ScanLines' lines, at most
// maxLine bytes each) and hands them to out in batches: a batch goes when it
// has inputBatchLines records, and before each read of in, so that a line
// typed at a terminal is produced at once. It closes out at the end of the
// input, or returns when done is closed.
func readInput(in io.Reader, maxLine int, record func([]byte) *client.Record, out chan<- inputBatch, done <-chan struct{}) {
	var pending []*client.Record
	lines := 0
	send := func(b inputBatch) bool {
		select {
		case out <- b:
			return true
		case <-done:
			return false
		}
	}
	src := readerFunc(func(p []byte) (int, error) {
		if len(pending) > 0 {
			if !send(inputBatch{records: pending}) {
				return 0, errStopped
			}
			pending = nil
		}
		return in.Read(p)
	})
	scanner := bufio.NewScanner(src)
	// A line and its newline fit in the buffer.
	scanner.Buffer(make([]byte, 0, min(64<<10, maxLine+1)), maxLine+1)
	for scanner.Scan() {
		lines++
		pending = append(pending, record(scanner.Bytes()))
		if len(pending) == inputBatchLines {
			if !send(inputBatch{records: pending}) {
				return
			}
			pending = nil
		}
	}
	var err error
	switch serr := scanner.Err(); {
	case errors.Is(serr, errStopped):
		return
	case errors.Is(serr, bufio.ErrTooLong):
		err = fmt.Errorf("line %d is longer than --max-line %d bytes", lines+1, maxLine)
	case serr != nil:
		err = fmt.Errorf("reading standard input: %w", serr)
	}
	if send(inputBatch{records: pending, err: err}) && err == nil {
		close(out)
	}
}

// readerFunc is an io.Reader made of a function.
type readerFunc func(p []byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }
