package client

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Vectors from Kafka's UtilsTest.testMurmur2.
func TestMurmur2KafkaVectors(t *testing.T) {
	tests := []struct {
		in   string
		want int32
	}{
		{"21", -973932308},
		{"foobar", -790332482},
		{"a-little-bit-long-string", -985981536},
		{"a-little-bit-longer-string", -1486304829},
		{"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971},
		{"abc", 479470107},
		{"", 275646681},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			require.Equal(t, tt.want, Murmur2([]byte(tt.in)))
		})
	}
	// toPositive(-790332482) = 1357151166, 1357151166 % 50 = 16.
	require.Equal(t, 16, KeyPartition([]byte("foobar"), 50))
}

// Keys land where franz-go's Kafka-compatible key partitioner puts them.
func TestKeyPartitionMatchesFranzGo(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	kp := kgo.StickyKeyPartitioner(nil).ForTopic("t")
	for i := range 2000 {
		key := make([]byte, rng.IntN(40))
		for j := range key {
			key[j] = byte(rng.Uint32())
		}
		n := 1 + i%97
		want := kp.Partition(&kgo.Record{Key: key}, n)
		require.Equal(t, want, KeyPartition(key, n), "key %x over %d partitions", key, n)
		require.Equal(t, want, DefaultPartitioner().ForTopic("t").Partition(&Record{Key: key}, n))
	}
}

func TestStickyPartitioners(t *testing.T) {
	for name, p := range map[string]Partitioner{"default": DefaultPartitioner(), "sticky": StickyPartitioner()} {
		t.Run(name, func(t *testing.T) {
			tp := p.ForTopic("t")
			first := tp.Partition(&Record{}, 8)
			for range 100 {
				require.Equal(t, first, tp.Partition(&Record{Value: []byte("v")}, 8))
			}
			tp.OnBatchSealed((first + 1) % 8) // another partition's batch: no switch
			require.Equal(t, first, tp.Partition(&Record{}, 8))
			seen := map[int]bool{first: true}
			prev := first
			for range 200 {
				tp.OnBatchSealed(prev)
				next := tp.Partition(&Record{}, 8)
				require.NotEqual(t, prev, next, "a sealed batch moves the sticky partition")
				seen[next] = true
				prev = next
			}
			require.Len(t, seen, 8)
			require.Equal(t, 0, tp.Partition(&Record{}, 1))
		})
	}
	keyed := &Record{Key: []byte("foobar")}
	require.Equal(t, 16, DefaultPartitioner().ForTopic("t").Partition(keyed, 50))
	sticky := StickyPartitioner().ForTopic("t")
	got := sticky.Partition(keyed, 50)
	for range 10 {
		require.Equal(t, got, sticky.Partition(&Record{Key: []byte(fmt.Sprint(rand.Int()))}, 50), "sticky ignores keys")
	}
}

func TestOtherPartitioners(t *testing.T) {
	rr := RoundRobinPartitioner().ForTopic("t")
	for i := range 10 {
		require.Equal(t, i%3, rr.Partition(&Record{}, 3))
	}
	m := ManualPartitioner().ForTopic("t")
	require.Equal(t, 5, m.Partition(&Record{Partition: 5}, 8))
	require.ErrorIs(t, checkPartition("t", m.Partition(&Record{Partition: -1}, 8), 8), ErrBadPartition)
	require.ErrorIs(t, checkPartition("t", 8, 8), ErrBadPartition)
	f := PartitionerFunc(func(r *Record, n int) int { return len(r.Value) % n }).ForTopic("t")
	require.Equal(t, 2, f.Partition(&Record{Value: []byte("abcde")}, 3))
}
