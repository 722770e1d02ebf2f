package node

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/depot-dev/depot/actors/client"
	"github.com/depot-dev/depot/disk"
	"github.com/depot-dev/depot/messages"
)

// BenchmarkProduceDuringMove produces 1 KiB records with acks=1 through the
// client to one partition, while nothing else happens ("idle") and while the
// partition moves back and forth between two log directories at the default
// move throttle ("moving"). Run with:
//
//	go test -run '^$' -bench ProduceDuringMove -benchtime 200000x ./node/
func BenchmarkProduceDuringMove(b *testing.B) {
	for _, moving := range []bool{false, true} {
		name := "idle"
		if moving {
			name = "moving"
		}
		b.Run(name, func(b *testing.B) {
			cfg := moveTestConfig(b, b.TempDir(), disk.OS)
			n := startNode(b, cfg)
			c := newClient(b, n.Address())
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			_, err := c.CreateTopic(ctx, "orders", 1, nil)
			require.NoError(b, err)
			fill(b, c, "orders", 1, 64<<20) // a log worth moving
			pid := partitionPID(b, n, "orders", 0)

			stop := make(chan struct{})
			var wg sync.WaitGroup
			moves := 0
			if moving {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						select {
						case <-stop:
							return
						default:
						}
						st := request[*messages.PartitionStatusResponse](b, n, pid, &messages.PartitionStatusRequest{})
						target := cfg.LogDirs[0].Path
						if st.LogDir == target {
							target = cfg.LogDirs[1].Path
						}
						res, err := n.System().Root.RequestFuture(pid, &messages.MovePartitionRequest{
							TargetDir: target, TargetLogDirActor: logDirActorID(b, n, target), ThrottleBytesPerS: 64 << 20,
						}, time.Minute).Result()
						if resp, ok := res.(*messages.MovePartitionResponse); err == nil && ok && resp.Error == messages.ErrorCode_NONE {
							moves++
						}
					}
				}()
			}
			p, err := c.NewProducer(client.Acks(1))
			require.NoError(b, err)
			value := make([]byte, 1024)
			var failed error
			var mu sync.Mutex
			b.SetBytes(int64(len(value)))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
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
			close(stop)
			wg.Wait()
			require.NoError(b, p.Close())
			require.NoError(b, failed)
			if moving {
				b.ReportMetric(float64(moves), "moves")
				require.Positive(b, moves, "the partition moved during the run")
			}
		})
	}
}

// BenchmarkGroupConsume reads a six-partition topic of 1 KiB records with a
// group of three members, each with its own client, from the start. b.N is
// the number of records. Run with:
//
//	go test -run '^$' -bench GroupConsume -benchtime 300000x ./node/
func BenchmarkGroupConsume(b *testing.B) {
	cfg := testConfig(b, b.TempDir())
	n := startNode(b, cfg)
	c := newClient(b, n.Address())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	_, err := c.CreateTopic(ctx, "events", 6, nil)
	require.NoError(b, err)
	fill(b, c, "events", 6, (b.N/6+1)*1024)
	total := int64(6 * (b.N/6 + 1))

	pollCtx, stopPolling := context.WithCancel(ctx)
	defer stopPolling()
	var consumed sync.WaitGroup
	var mu sync.Mutex
	var count int64
	done := make(chan struct{})
	b.SetBytes(1024)
	b.ResetTimer()
	for m := 0; m < 3; m++ {
		consumed.Add(1)
		member := newClient(b, n.Address())
		g, err := member.NewGroupConsumer("bench", []string{"events"}, client.ResetOffset(client.ResetEarliest))
		require.NoError(b, err)
		go func() {
			defer consumed.Done()
			defer g.Close()
			for {
				records, err := g.Poll(pollCtx)
				if err != nil {
					return
				}
				mu.Lock()
				count += int64(len(records))
				if count >= total {
					select {
					case <-done:
					default:
						close(done)
					}
				}
				mu.Unlock()
				select {
				case <-done:
					return
				default:
				}
			}
		}()
	}
	select {
	case <-done:
	case <-ctx.Done():
		b.Fatal("group did not consume everything")
	}
	b.StopTimer()
	stopPolling()
	consumed.Wait()
}
