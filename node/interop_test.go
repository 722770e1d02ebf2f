package node

import (
	"context"
	"strings"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"

	"github.com/depot-dev/depot/actors"
	"github.com/depot-dev/depot/actors/actortest"
	depotremote "github.com/depot-dev/depot/actors/remote"
	"github.com/depot-dev/depot/messages"
	"github.com/depot-dev/depot/wire"
)

// A peer on protoactor's stock remote settings (gRPC's own proto codec and
// buffer pool) produces to a node and fetches back, in chunks, large
// batches that take the codec's uncopied paths both ways: the node's
// remote codec speaks plain protobuf.
func TestStockRemotePeerProducesAndFetches(t *testing.T) {
	n := startNode(t, testConfig(t, t.TempDir()))
	created := request[*messages.CreateTopicResponse](t, n, n.Metadata(), &messages.CreateTopicRequest{Name: "interop", Partitions: 1})
	require.Equal(t, messages.ErrorCode_NONE, created.Error, created.ErrorMessage)
	pid := partitionPID(t, n, "interop", 0)

	peer := actortest.System(t)
	r := remote.NewRemote(peer, remote.Configure("127.0.0.1", 0,
		remote.WithServerOptions(grpc.MaxRecvMsgSize(depotremote.MaxRemoteMessageBytes)),
		remote.WithDialOptions(grpc.WithInsecure(), //nolint:staticcheck // protoactor's own default
			grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(depotremote.MaxRemoteMessageBytes), grpc.MaxCallRecvMsgSize(depotremote.MaxRemoteMessageBytes)))))
	r.Start()
	t.Cleanup(func() {
		r.Shutdown(false)
	})
	ctx := context.Background()

	var want []string
	for i := range 4 {
		var values []string
		for j := range 50 {
			values = append(values, strings.Repeat(string(rune('a'+(i*50+j)%26)), 2000+i*50+j))
		}
		want = append(want, values...)
		resp, err := actors.Request[*messages.ProduceResponse](ctx, peer.Root, pid,
			&messages.ProduceRequest{Topic: "interop", Acks: 1, Records: actortest.Batch(t, values...)}, requestTimeout)
		require.NoError(t, err)
		require.Equal(t, messages.ErrorCode_NONE, resp.Error, resp.ErrorMessage)
		require.Equal(t, int64(i*50), resp.BaseOffset)
	}

	// One fetch, answered in chunks of about one batch each.
	collected := make(chan *messages.FetchResponse, 16)
	collector := peer.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		switch m := c.Message().(type) {
		case *actor.Started:
			c.Request(pid, &messages.FetchRequest{Topic: "interop", Offset: 0, MaxBytes: 1 << 20, ChunkBytes: 100 << 10, CorrelationId: 7})
		case *messages.FetchResponse:
			collected <- m
		}
	}))
	defer peer.Root.Stop(collector)
	var got []string
	for chunks := 1; ; chunks++ {
		var m *messages.FetchResponse
		select {
		case m = <-collected:
		case <-t.Context().Done():
			t.Fatal("no answer")
		}
		require.Equal(t, messages.ErrorCode_NONE, m.Error, m.ErrorMessage)
		require.Equal(t, int64(len(got)), m.Offset, "chunk %d starts where the last ended", chunks)
		rest, err := wire.Batches(m.Records, func(batch []byte, _ wire.Header) error {
			return wire.Records(batch, func(rec wire.Record) error {
				got = append(got, string(rec.Value))
				return nil
			})
		})
		require.NoError(t, err)
		require.Empty(t, rest)
		if !m.More {
			require.Equal(t, 4, chunks)
			break
		}
	}
	require.Equal(t, want, got)
}
