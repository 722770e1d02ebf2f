package partition

import (
	"fmt"
	"io"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"

	"github.com/depot-dev/depot/actors"
	"github.com/depot-dev/depot/actors/disks"
	"github.com/depot-dev/depot/actors/topic"
	"github.com/depot-dev/depot/disk"
	"github.com/depot-dev/depot/messages"
)

// BenchmarkPartitionProduce keeps 64 produce requests of 16 records of 1
// KiB in flight to one partition, with acks 1 and all: the partition
// actor's cost per request, its log's and fsyncs' included, without the
// network.
func BenchmarkPartitionProduce(b *testing.B) {
	const inFlight, records, size = 64, 16, 1024
	for _, acks := range []int32{1, -1} {
		b.Run(fmt.Sprintf("acks=%d", acks), func(b *testing.B) {
			logger := logrus.New()
			logger.SetOutput(io.Discard)
			system := actors.NewActorSystem(logger)
			defer system.Shutdown()
			cfg, err := topic.ParseConfig(map[string]string{topic.ConfigSegmentBytes: fmt.Sprint(1 << 30)})
			require.NoError(b, err)
			pid := system.Root.Spawn(NewPartitionProps(PartitionConfig{
				Topic: "orders", FS: disk.OS, LogDir: b.TempDir(), Config: cfg, Logger: logrus.NewEntry(logger),
			}))
			values := make([]string, records)
			for i := range values {
				values[i] = string(make([]byte, size))
			}
			batch, err := encodeBatch(values...)
			require.NoError(b, err)
			answers := make(chan *messages.ProduceResponse, inFlight)
			sender := system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
				if resp, ok := ctx.Message().(*messages.ProduceResponse); ok {
					answers <- resp
				}
			}))
			send := func() {
				// A copy each time: the partition stamps its leader epoch
				// on the batch in place.
				records := append([]byte(nil), batch...)
				system.Root.RequestWithCustomSender(pid, &messages.ProduceRequest{Topic: "orders", Acks: acks, Records: records}, sender)
			}
			b.SetBytes(int64(records * size))
			b.ReportAllocs()
			b.ResetTimer()
			sent := 0
			for ; sent < min(inFlight, b.N); sent++ {
				send()
			}
			for range b.N {
				resp := <-answers
				if resp.Error != messages.ErrorCode_NONE {
					b.Fatal(resp.Error, resp.ErrorMessage)
				}
				if sent < b.N {
					send()
					sent++
				}
			}
			b.StopTimer()
		})
	}
}

// BenchmarkManyPartitionsAcksAll keeps one acks=all produce request of 4
// records of 100 bytes in flight to each of many partitions on one log
// dir, each answer sending the partition its next request: the node's cost
// of a group commit per partition per request, with the partitions running
// their own fsyncs and with the log dir's flusher running them in passes,
// without the client or the network. Setting up the partitions takes
// seconds: run it with a fixed count, -benchtime 20000x.
func BenchmarkManyPartitionsAcksAll(b *testing.B) {
	const partitions, records, size = 1000, 4, 100
	for _, flusher := range []bool{false, true} {
		b.Run(fmt.Sprintf("flusher=%v", flusher), func(b *testing.B) {
			logger := logrus.New()
			logger.SetOutput(io.Discard)
			system := actors.NewActorSystem(logger)
			defer system.Shutdown()
			cfg, err := topic.ParseConfig(nil)
			require.NoError(b, err)
			var flusherPID *actor.PID
			if flusher {
				flusherPID = system.Root.Spawn(disks.NewFlusherProps(disks.FlusherConfig{Logger: logrus.NewEntry(logger)}))
			}
			dir := b.TempDir()
			pids := make([]*actor.PID, partitions)
			for p := range pids {
				pids[p] = system.Root.Spawn(NewPartitionProps(PartitionConfig{
					Topic: "orders", Partition: int32(p), FS: disk.OS, LogDir: dir, Config: cfg, Flusher: flusherPID, Logger: logrus.NewEntry(logger),
				}))
			}
			values := make([]string, records)
			for i := range values {
				values[i] = string(make([]byte, size))
			}
			batch, err := encodeBatch(values...)
			require.NoError(b, err)
			answers := make(chan *messages.ProduceResponse, partitions)
			sender := system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
				if resp, ok := ctx.Message().(*messages.ProduceResponse); ok {
					answers <- resp
				}
			}))
			send := func(p int32) {
				records := append([]byte(nil), batch...)
				system.Root.RequestWithCustomSender(pids[p], &messages.ProduceRequest{Topic: "orders", Partition: p, Acks: -1, Records: records}, sender)
			}
			// Every partition opens its log and takes a first request
			// before the clock starts.
			for p := range pids {
				send(int32(p))
			}
			for range pids {
				if resp := <-answers; resp.Error != messages.ErrorCode_NONE {
					b.Fatal(resp.Error, resp.ErrorMessage)
				}
			}
			b.SetBytes(records * size)
			b.ReportAllocs()
			b.ResetTimer()
			sent := 0
			for ; sent < min(partitions, b.N); sent++ {
				send(int32(sent))
			}
			for range b.N {
				resp := <-answers
				if resp.Error != messages.ErrorCode_NONE {
					b.Fatal(resp.Error, resp.ErrorMessage)
				}
				if sent < b.N {
					send(resp.Partition)
					sent++
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N*records)/b.Elapsed().Seconds(), "records/s")
		})
	}
}
