package node

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/depot-dev/depot/actors/client"
)

// Three nodes run in one process, each with its own actor system and remote
// state, and share nothing: each is produced to at once, with records large
// enough to travel as buffers of their own (the remote codec's zero-copy
// paths), and each holds exactly what it was sent. One stops, and the other
// two go on serving.
func TestThreeNodesInOneProcess(t *testing.T) {
	const (
		partitions = 3
		records    = 3000
		valueBytes = 2 << 10
	)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	nodes := make([]*Node, 3)
	clients := make([]*client.Client, 3)
	for i := range nodes {
		cfg := testConfig(t, t.TempDir())
		cfg.NodeID = int32(i + 1)
		cfg.HTTP = ""
		nodes[i] = startNode(t, cfg)
		clients[i] = newClient(t, nodes[i].Address())
		_, err := clients[i].CreateTopic(ctx, "shared-name", partitions, nil)
		require.NoError(t, err)
	}
	require.NotSame(t, nodes[0].Transport(), nodes[1].Transport())
	require.NotSame(t, nodes[1].Transport(), nodes[2].Transport())

	value := func(node, i int) []byte {
		v := bytes.Repeat([]byte{byte('a' + node)}, valueBytes)
		return fmt.Appendf(v[:0:0], "node-%d-%06d-%s", node, i, v)
	}
	produce := func(node, from, to int) {
		p, err := clients[node].NewProducer(client.Acks(-1))
		require.NoError(t, err)
		defer p.Close()
		for i := from; i < to; i++ {
			p.Produce(ctx, &client.Record{Topic: "shared-name", Key: fmt.Appendf(nil, "k%d", i), Value: value(node, i)}, nil)
		}
		require.NoError(t, p.Flush(ctx))
	}
	check := func(node, want int) {
		got := consumeAll(t, clients[node], "shared-name", partitions)
		seen := map[string]bool{}
		for _, rs := range got {
			for _, r := range rs {
				require.True(t, bytes.HasPrefix(r.Value, fmt.Appendf(nil, "node-%d-", node)), "node %d holds %.12q", node, r.Value)
				seen[string(r.Value)] = true
			}
		}
		require.Len(t, seen, want, "node %d", node)
		for i := range want {
			require.True(t, seen[string(value(node, i))], "node %d lost record %d", node, i)
		}
	}

	var wg sync.WaitGroup
	for i := range nodes {
		wg.Go(func() { produce(i, 0, records) })
	}
	wg.Wait()
	for i := range nodes {
		check(i, records)
	}

	require.NoError(t, nodes[1].Stop())
	for _, i := range []int{0, 2} {
		wg.Go(func() { produce(i, records, 2*records) })
	}
	wg.Wait()
	check(0, 2*records)
	check(2, 2*records)
}
