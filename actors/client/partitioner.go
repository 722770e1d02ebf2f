package client

import (
	"errors"
	"fmt"
	"math/rand/v2"
)

// ErrBadPartition means a partitioner chose a partition outside the topic.
var ErrBadPartition = errors.New("client: partition out of range")

// Partitioner chooses partitions for records. The producer asks it for one
// TopicPartitioner per topic.
type Partitioner interface {
	ForTopic(topic string) TopicPartitioner
}

// TopicPartitioner chooses a partition for each record of one topic. The
// producer calls it under its lock, so an implementation needs no locking of
// its own; it must not block.
type TopicPartitioner interface {
	// Partition returns the partition of r among n (0 <= result < n).
	Partition(r *Record, n int) int
	// OnBatchSealed tells the partitioner that the open batch of partition
	// was closed and handed to the sender; sticky partitioners move on then.
	OnBatchSealed(partition int)
}

// Murmur2 is Kafka's murmur2 hash (org.apache.kafka.common.utils.Utils.murmur2),
// with its seed 0x9747b28c, returned as Java's signed int.
func Murmur2(data []byte) int32 {
	const (
		seed = 0x9747b28c
		m    = 0x5bd1e995
		r    = 24
	)
	length := len(data)
	h := uint32(seed) ^ uint32(length)
	n4 := length / 4
	for i := 0; i < n4; i++ {
		i4 := i * 4
		k := uint32(data[i4]) | uint32(data[i4+1])<<8 | uint32(data[i4+2])<<16 | uint32(data[i4+3])<<24
		k *= m
		k ^= k >> r
		k *= m
		h *= m
		h ^= k
	}
	tail := data[n4*4:]
	switch len(tail) {
	case 3:
		h ^= uint32(tail[2]) << 16
		fallthrough
	case 2:
		h ^= uint32(tail[1]) << 8
		fallthrough
	case 1:
		h ^= uint32(tail[0])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return int32(h)
}

// KeyPartition is the partition Kafka's default partitioner gives key among
// n partitions: toPositive(murmur2(key)) % n.
func KeyPartition(key []byte, n int) int {
	return int(uint32(Murmur2(key))&0x7fffffff) % n
}

// DefaultPartitioner is Kafka's default: records with a key go to
// KeyPartition(key, n), so a key lands on the same partition as with Kafka's
// clients; records without a key stick to one partition until its batch is
// sealed, then to another chosen at random (KIP-480).
func DefaultPartitioner() Partitioner { return defaultPartitioner{} }

type defaultPartitioner struct{}

func (defaultPartitioner) ForTopic(string) TopicPartitioner {
	return &stickyTopic{keyed: true, sticky: -1, previous: -1}
}

// StickyPartitioner ignores keys: every record sticks to one partition until
// its batch is sealed, then to another chosen at random.
func StickyPartitioner() Partitioner { return stickyPartitioner{} }

type stickyPartitioner struct{}

func (stickyPartitioner) ForTopic(string) TopicPartitioner {
	return &stickyTopic{sticky: -1, previous: -1}
}

// stickyTopic is the sticky partitioner of one topic, hashing keys when keyed.
type stickyTopic struct {
	keyed    bool
	sticky   int // current partition, -1 for none
	previous int // partition before the last switch, -1 for none
}

func (p *stickyTopic) Partition(r *Record, n int) int {
	if p.keyed && r.Key != nil {
		return KeyPartition(r.Key, n)
	}
	if p.sticky >= 0 && p.sticky < n {
		return p.sticky
	}
	p.sticky = rand.IntN(n)
	if n > 1 && p.sticky == p.previous {
		p.sticky = (p.sticky + 1) % n
	}
	return p.sticky
}

func (p *stickyTopic) OnBatchSealed(partition int) {
	if partition == p.sticky {
		p.previous, p.sticky = partition, -1
	}
}

// RoundRobinPartitioner sends each record to the next partition in turn.
func RoundRobinPartitioner() Partitioner { return roundRobin{} }

type roundRobin struct{}

func (roundRobin) ForTopic(string) TopicPartitioner { return &roundRobinTopic{} }

type roundRobinTopic struct{ next int }

func (p *roundRobinTopic) Partition(_ *Record, n int) int {
	i := p.next % n
	p.next = i + 1
	return i
}

func (*roundRobinTopic) OnBatchSealed(int) {}

// ManualPartitioner honours r.Partition, which must name an existing
// partition; Produce fails the record with ErrBadPartition otherwise.
func ManualPartitioner() Partitioner { return manual{} }

type manual struct{}

func (manual) ForTopic(string) TopicPartitioner { return manual{} }

func (manual) Partition(r *Record, _ int) int { return int(r.Partition) }

func (manual) OnBatchSealed(int) {}

// PartitionerFunc partitions with fn, which returns the partition of r among
// n. fn is called under the producer's lock and must not block.
func PartitionerFunc(fn func(r *Record, n int) int) Partitioner { return funcPartitioner(fn) }

type funcPartitioner func(r *Record, n int) int

func (f funcPartitioner) ForTopic(string) TopicPartitioner { return f }

func (f funcPartitioner) Partition(r *Record, n int) int { return f(r, n) }

func (funcPartitioner) OnBatchSealed(int) {}

// checkPartition returns an error when p is not a partition of a topic with n.
func checkPartition(topic string, p, n int) error {
	if p < 0 || p >= n {
		return fmt.Errorf("%w: %s has %d partitions, got %d", ErrBadPartition, topic, n, p)
	}
	return nil
}
