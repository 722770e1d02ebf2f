package node

import (
	"context"
	"crypto/rand"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/depot-dev/depot/actors/client"
)

// benchRecordBytes is the value size of the Kafka benchmarks' records.
const benchRecordBytes = 1024

// benchValue is a record value that does not compress.
func benchValue() []byte {
	v := make([]byte, benchRecordBytes)
	_, _ = rand.Read(v)
	return v
}

// benchKgoProducer is a kgo producer of "orders" with acks=1, without
// compression, which kgo otherwise does (snappy), as the actor client
// does not, and with five produce requests in flight, as the actor client
// and Kafka's own producer (max.in.flight.requests.per.connection) have by
// default: acks=1 needs idempotence off, where kgo's default is one.
// With one, kgo produced through a node at 67-82 % of the actor client's
// rate in three runs of 2026-12-06; with five, at 120-140 % in four.
func benchKgoProducer(b *testing.B, seeds []string) *kgo.Client {
	return kafkaClient(b, kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic("orders"), kgo.RequiredAcks(kgo.LeaderAck()),
		kgo.DisableIdempotentWrite(), kgo.MaxProduceRequestsInflightPerBroker(5), kgo.ProducerBatchCompression(kgo.NoCompression()))
}

// kafkaBenchTargets are the Kafka listeners the Kafka benchmarks measure,
// each with a topic "orders" of that many partitions: a node's ("depot"),
// and kfake's, franz-go's in-memory fake cluster ("kfake"), as the
// yardstick.
func kafkaBenchTargets(partitions int32) map[string]func(b *testing.B) []string {
	return map[string]func(b *testing.B) []string{
		"depot": func(b *testing.B) []string {
			cfg := testConfig(b, b.TempDir())
			cfg.HTTP, cfg.KafkaListen = "", "127.0.0.1:0"
			n := startNode(b, cfg)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_, err := newClient(b, n.Address()).CreateTopic(ctx, "orders", partitions, nil)
			require.NoError(b, err)
			return []string{n.KafkaAddress()}
		},
		"floor": startFloorBroker,
		"kfake": func(b *testing.B) []string {
			c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, "orders"))
			require.NoError(b, err)
			b.Cleanup(c.Close)
			return c.ListenAddrs()
		},
	}
}

// BenchmarkKafkaProduce produces 1 KiB records with acks=1 to one
// partition, uncompressed: franz-go's kgo through a node's Kafka listener
// ("kgo-depot") and through kfake ("kgo-kfake"), and Depot's actor client
// to a node over protoactor remote ("actor-client"). b.N is the number of
// records.
// Run with:
//
//	go test -run '^$' -bench KafkaProduce -benchtime 200000x ./node/
func BenchmarkKafkaProduce(b *testing.B) {
	for _, target := range []string{"depot", "kfake"} {
		b.Run("kgo-"+target, func(b *testing.B) {
			seeds := kafkaBenchTargets(1)[target](b)
			cl := benchKgoProducer(b, seeds)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			require.NoError(b, cl.ProduceSync(ctx, &kgo.Record{Value: []byte("warm")}).FirstErr())
			value := benchValue()
			var failed error
			var mu sync.Mutex
			b.SetBytes(benchRecordBytes)
			b.ResetTimer()
			for range b.N {
				cl.Produce(ctx, &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
					if err != nil {
						mu.Lock()
						failed = err
						mu.Unlock()
					}
				})
			}
			require.NoError(b, cl.Flush(ctx))
			b.StopTimer()
			require.NoError(b, failed)
		})
	}
	b.Run("actor-client", func(b *testing.B) {
		cfg := testConfig(b, b.TempDir())
		cfg.HTTP = ""
		n := startNode(b, cfg)
		c := newClient(b, n.Address())
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		_, err := c.CreateTopic(ctx, "orders", 1, nil)
		require.NoError(b, err)
		p, err := c.NewProducer(client.Acks(1))
		require.NoError(b, err)
		require.NoError(b, p.ProduceSync(ctx, &client.Record{Topic: "orders", Value: []byte("warm")}))
		value := benchValue()
		var failed error
		var mu sync.Mutex
		b.SetBytes(benchRecordBytes)
		b.ResetTimer()
		for range b.N {
			p.Produce(ctx, &client.Record{Topic: "orders", Value: value}, func(_ *client.Record, err error) {
				if err != nil {
					mu.Lock()
					failed = err
					mu.Unlock()
				}
			})
		}
		require.NoError(b, p.Flush(ctx))
		b.StopTimer()
		require.NoError(b, p.Close())
		require.NoError(b, failed)
	})
}

// BenchmarkKafkaConsume reads b.N records of 1 KiB from one partition
// from the start, written beforehand: kgo through a node's Kafka listener
// ("kgo-depot"), through kfake ("kgo-kfake") and through a floorBroker
// ("kgo-floor", the most a broker could give kgo here), and Depot's actor
// client from a node over protoactor remote ("actor-client"). Run with:
//
//	go test -run '^$' -bench KafkaConsume -benchtime 200000x ./node/
func BenchmarkKafkaConsume(b *testing.B) {
	for _, target := range []string{"depot", "kfake", "floor"} {
		b.Run("kgo-"+target, func(b *testing.B) {
			seeds := kafkaBenchTargets(1)[target](b)
			benchReadBack(b, seeds, benchKgoProducer(b, seeds))
		})
	}
	b.Run("actor-client", func(b *testing.B) {
		cfg := testConfig(b, b.TempDir())
		cfg.HTTP = ""
		n := startNode(b, cfg)
		c := newClient(b, n.Address())
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		_, err := c.CreateTopic(ctx, "orders", 1, nil)
		require.NoError(b, err)
		p, err := c.NewProducer(client.Acks(1))
		require.NoError(b, err)
		value := benchValue()
		for range b.N {
			p.Produce(ctx, &client.Record{Topic: "orders", Value: value}, nil)
		}
		require.NoError(b, p.Flush(ctx))
		require.NoError(b, p.Close())
		cons, err := c.NewConsumer()
		require.NoError(b, err)
		defer cons.Close()
		cons.AssignTopic("orders", client.AtStart())
		b.SetBytes(benchRecordBytes)
		b.ResetTimer()
		for got := 0; got < b.N; {
			rs, err := cons.Poll(ctx)
			require.NoError(b, err)
			got += len(rs)
		}
		b.StopTimer()
	})
}

// BenchmarkKafkaConsumeManyPartitions reads b.N records of 1 KiB, written
// beforehand round-robin over the 64 partitions of one node, with one kgo
// consumer through the node's Kafka listener ("kgo-depot") and through
// kfake ("kgo-kfake"): fetches of many partitions at once. Run with:
//
//	go test -run '^$' -bench KafkaConsumeManyPartitions -benchtime 200000x ./node/
func BenchmarkKafkaConsumeManyPartitions(b *testing.B) {
	targets := kafkaBenchTargets(64)
	for _, target := range []string{"depot", "kfake"} {
		b.Run("kgo-"+target, func(b *testing.B) {
			seeds := targets[target](b)
			benchReadBack(b, seeds, kafkaClient(b, kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic("orders"), kgo.RequiredAcks(kgo.LeaderAck()),
				kgo.DisableIdempotentWrite(), kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.RecordPartitioner(kgo.RoundRobinPartitioner())))
		})
	}
}

// BenchmarkKafkaTailManyPartitions has a kgo consumer tail the 64
// partitions of one node while a producer writes b.N small records to
// them round-robin, one every 2 ms: each fetch waits for a record on any
// partition. It reports the process's CPU time per record (cpu-ns/record,
// node and clients together), which the fetches' waits dominate. Run
// with:
//
//	go test -run '^$' -bench KafkaTailManyPartitions -benchtime 1500x ./node/
func BenchmarkKafkaTailManyPartitions(b *testing.B) {
	const partitions = 64
	cfg := testConfig(b, b.TempDir())
	cfg.HTTP, cfg.KafkaListen = "", "127.0.0.1:0"
	n := startNode(b, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	_, err := newClient(b, n.Address()).CreateTopic(ctx, "orders", partitions, nil)
	require.NoError(b, err)
	seeds := []string{n.KafkaAddress()}
	prod := kafkaClient(b, kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic("orders"), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	require.NoError(b, prod.ProduceSync(ctx, &kgo.Record{Value: []byte("warm")}).FirstErr())
	cl := kafkaClient(b, kgo.SeedBrokers(seeds...), kgo.ConsumeTopics("orders"), kgo.ConsumeResetOffset(kgo.NewOffset().AtEnd()))
	consumed := make(chan error, 1)
	go func() {
		for got := 0; got < b.N; {
			fs := cl.PollFetches(ctx)
			if err := fs.Err(); err != nil {
				consumed <- err
				return
			}
			got += fs.NumRecords()
		}
		consumed <- nil
	}()
	// The consumer has its offsets and waits in a fetch once it has
	// read a first record.
	cpu := processCPU()
	b.ResetTimer()
	for range b.N {
		prod.Produce(ctx, &kgo.Record{Value: []byte("tail")}, nil)
		time.Sleep(2 * time.Millisecond)
	}
	require.NoError(b, <-consumed)
	b.StopTimer()
	b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/record")
}

// processCPU is the CPU time, user and system, the process has used.
func processCPU() time.Duration {
	var usage syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &usage)
	return time.Duration(usage.Utime.Nano() + usage.Stime.Nano())
}

// benchReadBack produces b.N records to "orders" through prod, then times
// a kgo consumer of seeds reading them all back from the start. Besides
// the throughput it reports the consumer's fetches: their count, and per
// fetch the wall time of the read (us-cycle/fetch), of reading each answer
// from its request's write on, the server's time included
// (us-read/fetch), the bytes answered (kB/fetch), and the records a batch
// (records/batch: the same for every target, as prod makes them). kgo
// sends a broker's next fetch once the last is polled, so the cycle is the
// read plus kgo's own decoding. It also reports the CPU time of the whole
// process a record (cpu-ns/record: kgo's, the server's and the garbage
// collector's), and the garbage collections of the read (gcs) with the
// heap after it (heap-MB): kgo allocates about a fetch's bytes for each
// answer, and the collector runs each time the heap has grown by what it
// held, so a server that holds every record in the process's heap, as
// kfake and the floor do, spares kgo nearly all of them.
func benchReadBack(b *testing.B, seeds []string, prod *kgo.Client) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	value := benchValue()
	for range b.N {
		prod.Produce(ctx, &kgo.Record{Value: value}, nil)
	}
	require.NoError(b, prod.Flush(ctx))
	fetches := &fetchTimes{}
	cl := kafkaClient(b, kgo.SeedBrokers(seeds...), kgo.ConsumeTopics("orders"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.WithHooks(fetches))
	b.SetBytes(benchRecordBytes)
	start, cpu := time.Now(), processCPU()
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	b.ResetTimer()
	for got := 0; got < b.N; {
		fs := cl.PollFetches(ctx)
		require.NoError(b, fs.Err())
		got += fs.NumRecords()
	}
	b.StopTimer()
	b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/record")
	runtime.ReadMemStats(&ms1)
	b.ReportMetric(float64(ms1.NumGC-ms0.NumGC), "gcs")
	b.ReportMetric(float64(ms1.HeapAlloc)/1e6, "heap-MB")
	fetches.report(b, time.Since(start))
}

// fetchTimes is a kgo hook that adds up the consumer's fetches, as kgo
// measures each request's round trip.
type fetchTimes struct {
	mu      sync.Mutex
	n       int
	bytes   int
	read    time.Duration
	batches int
	records int
}

func (f *fetchTimes) OnFetchBatchRead(_ kgo.BrokerMetadata, _ string, _ int32, m kgo.FetchBatchMetrics) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.batches++
	f.records += m.NumRecords
}

func (f *fetchTimes) OnBrokerE2E(_ kgo.BrokerMetadata, key int16, e kgo.BrokerE2E) {
	if key != (&kmsg.FetchRequest{}).Key() || e.Err() != nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	f.bytes += e.BytesRead
	f.read += e.ReadWait + e.TimeToRead
}

// report reports the fetches of a read that took elapsed.
func (f *fetchTimes) report(b *testing.B, elapsed time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n == 0 {
		return
	}
	n := float64(f.n)
	b.ReportMetric(n, "fetches")
	b.ReportMetric(float64(elapsed.Microseconds())/n, "us-cycle/fetch")
	b.ReportMetric(float64(f.read.Microseconds())/n, "us-read/fetch")
	b.ReportMetric(float64(f.bytes)/n/1e3, "kB/fetch")
	if f.batches > 0 {
		b.ReportMetric(float64(f.records)/float64(f.batches), "records/batch")
	}
}
