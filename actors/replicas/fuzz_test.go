package replicas

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// input is one call's arguments, as inputFromBytes reads them.
type input struct {
	nodes             []Node
	partitions, rf    int
	startIndex, shift int
}

// inputFromBytes reads arguments from data, one byte per choice: up to 15
// nodes with ids (possibly repeated), racks (none, or one of four; some
// nodes may lack one), bytes, growth (odd values included), leaders and
// fencing, then a partition count, a replication factor, a start index and
// a shift, each possibly out of range. Every byte string makes an input.
func inputFromBytes(data []byte) input {
	next := func() int {
		if len(data) == 0 {
			return 0
		}
		b := data[0]
		data = data[1:]
		return int(b)
	}
	var in input
	racks := next() % 3 // 0: none, 1: all, 2: some
	for range next() % 16 {
		n := Node{ID: int32(next() % 24)}
		switch {
		case racks == 1, racks == 2 && next()%4 != 0:
			n.Rack = string(rune('a' + next()%4))
		}
		n.Bytes = int64(next()-16) << (next() % 48)
		switch g := next(); {
		case g == 255:
			n.GrowthBytesPerSec = math.NaN()
		case g == 254:
			n.GrowthBytesPerSec = math.Inf(1)
		default:
			n.GrowthBytesPerSec = float64(g-8) * float64(int64(1)<<(next()%30))
		}
		n.Leaders = next()%200 - 2
		n.Fenced = next()%5 == 0
		in.nodes = append(in.nodes, n)
	}
	in.partitions = next()%64 - 1
	in.rf = next()%8 - 1
	in.startIndex = next()%40 - 1
	in.shift = next()%40 - 1
	return in
}

// wantError is the error a rule should return for in, or nil.
func wantError(in input, kafka bool) error {
	up, racked := len(live(in.nodes)), countRacked(in.nodes)
	switch {
	case in.partitions < 1:
		return ErrInvalidPartitions
	case in.rf < 1 || in.rf > up:
		return ErrInvalidReplicationFactor
	case kafka && (in.startIndex < 0 || in.shift < 0):
		return ErrInvalidStart
	case checkUnique(ids(in.nodes)) != nil:
		return ErrDuplicateNode
	case kafka && racked > 0 && racked < up:
		return ErrIncompleteRacks
	}
	return nil
}

// checkInput runs every rule on in and checks their promises.
func checkInput(t *testing.T, in input) {
	t.Helper()
	before := slices.Clone(in.nodes)

	got, err := LoadAware(in.nodes, in.partitions, in.rf)
	if want := wantError(in, false); want != nil {
		require.ErrorIs(t, err, want)
		require.Nil(t, got)
	} else {
		require.NoError(t, err)
		checkLoadAware(t, in.nodes, in.partitions, in.rf, got)
		reversed := slices.Clone(in.nodes)
		slices.Reverse(reversed)
		again, err := LoadAware(reversed, in.partitions, in.rf)
		require.NoError(t, err)
		require.Equal(t, got, again, "order of nodes changed the answer")
	}

	got, err = RackAware(in.nodes, in.partitions, in.rf, in.startIndex, in.shift)
	if want := wantError(in, true); want != nil {
		require.ErrorIs(t, err, want)
		require.Nil(t, got)
	} else {
		require.NoError(t, err)
		checkKafka(t, live(in.nodes), in.partitions, in.rf, got)
		if countRacked(in.nodes) == 0 {
			unaware, err := RackUnaware(ids(live(in.nodes)), in.partitions, in.rf, in.startIndex, in.shift)
			require.NoError(t, err)
			require.Equal(t, unaware, got, "without racks RackAware is RackUnaware")
		}
	}

	var up []int32
	for _, n := range in.nodes {
		if !n.Fenced {
			up = append(up, n.ID)
		}
	}
	got, err = RackUnaware(up, in.partitions, in.rf, in.startIndex, in.shift)
	unracked := input{nodes: live(in.nodes), partitions: in.partitions, rf: in.rf, startIndex: in.startIndex, shift: in.shift}
	for i := range unracked.nodes {
		unracked.nodes[i].Rack = ""
	}
	if want := wantError(unracked, true); want != nil {
		require.ErrorIs(t, err, want)
		require.Nil(t, got)
	} else {
		require.NoError(t, err)
		checkKafka(t, unracked.nodes, in.partitions, in.rf, got)
	}

	for i := range before {
		require.Equal(t, math.Float64bits(before[i].GrowthBytesPerSec), math.Float64bits(in.nodes[i].GrowthBytesPerSec))
		before[i].GrowthBytesPerSec, in.nodes[i].GrowthBytesPerSec = 0, 0
	}
	require.Equal(t, before, in.nodes, "nodes modified")
}

// countRacked is the number of live nodes with a rack.
func countRacked(nodes []Node) int {
	racked := 0
	for _, n := range live(nodes) {
		if n.Rack != "" {
			racked++
		}
	}
	return racked
}

// checkKafka checks the promises of Kafka's rules over the live nodes up:
// distinct replicas, the round-robin's even leaders, replicas on
// min(rf, racks) racks when racked, and, when the partitions fill whole
// rounds without racks, the same number of replicas on every node.
func checkKafka(t *testing.T, up []Node, partitions, rf int, got [][]int32) {
	t.Helper()
	rackOf := map[int32]string{}
	for _, n := range up {
		rackOf[n.ID] = n.Rack
	}
	racks := countRacks(up)
	require.Len(t, got, partitions)
	d := distributionOf(got, rackOf)
	for p, replicas := range got {
		require.Len(t, replicas, rf)
		require.Equal(t, rf, distinct(replicas), "partition %d: %v", p, replicas)
		for _, id := range replicas {
			require.Contains(t, rackOf, id)
		}
		if rackOf[replicas[0]] != "" {
			require.Equal(t, min(rf, racks), distinct(d.partitionRacks[p]), "partition %d: %v", p, replicas)
		}
	}
	for id, rack := range rackOf {
		require.Contains(t, []int{partitions / len(up), partitions/len(up) + 1}, d.leaders[id])
		if rack == "" && partitions%len(up) == 0 {
			require.Equal(t, partitions*rf/len(up), d.replicas[id], "replicas of %d: %v", id, d.replicas)
		}
	}
}

// FuzzAssignment checks every rule's promises, and its errors, on arbitrary
// arguments.
func FuzzAssignment(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0, 5, 0, 20, 1, 0, 0, 0, 1, 20, 1, 0, 0, 0, 2, 20, 1, 0, 0, 0, 3, 20, 1, 0, 0, 0, 4, 20, 1, 0, 0, 0, 11, 4, 1, 1})
	f.Add([]byte{1, 6, 0, 0, 30, 40, 9, 3, 7, 1, 1, 1, 2, 2, 0, 0, 1, 2, 1, 1, 2, 0, 40, 5, 1, 1, 3, 1, 3, 3, 1, 3, 1, 4, 2, 2, 2, 2, 2, 2, 5, 0, 255, 9, 1, 30, 4, 3, 7})
	f.Add([]byte{2, 9, 3, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63, 64, 65, 66, 67, 68, 69, 70, 71, 72, 73, 74, 75, 76, 77, 78, 79, 80, 81})
	f.Fuzz(func(t *testing.T, data []byte) {
		checkInput(t, inputFromBytes(data))
	})
}

// TestProperties runs FuzzAssignment's checks on a fixed stream of random
// inputs, so every go test covers many more than the seed corpus.
func TestProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	valid := 0
	for i := range 3000 {
		data := make([]byte, 20+rng.IntN(120))
		for j := range data {
			data[j] = byte(rng.Uint32())
		}
		in := inputFromBytes(data)
		if wantError(in, false) == nil {
			valid++
		}
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			t.Logf("input %v", data)
			checkInput(t, in)
		})
	}
	require.Greater(t, valid, 300, "too few inputs LoadAware accepts to test its promises")
}
