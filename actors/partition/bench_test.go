package partition

import (
	"fmt"
	"io"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"

	"github.com/depot-dev/depot/actors"
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
