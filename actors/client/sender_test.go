package client

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPartQueueOrder pushes and pops in runs of several lengths, across
// the queue's reclaiming of taken slots, and checks that partitions come
// out in the order they went in, each once.
func TestPartQueueOrder(t *testing.T) {
	tests := []struct {
		name       string
		push, pop  int // per round
		rounds     int
		wantRemain int
	}{
		{name: "empty after each round", push: 3, pop: 3, rounds: 100},
		{name: "grows", push: 5, pop: 3, rounds: 200, wantRemain: 400},
		{name: "long then drained", push: 1000, pop: 1000, rounds: 3},
		{name: "one at a time behind a long queue", push: 1, pop: 1, rounds: 500, wantRemain: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var q partQueue
			var in, out []*partSender
			for range tt.rounds {
				for range tt.push {
					ps := &partSender{key: partKey{partition: int32(len(in))}}
					in = append(in, ps)
					q.push(ps)
				}
				for range tt.pop {
					out = append(out, q.pop())
				}
			}
			require.Equal(t, tt.wantRemain, q.len())
			for q.len() > 0 {
				out = append(out, q.pop())
			}
			require.Equal(t, in, out)
			require.Zero(t, q.len())
		})
	}
}
