// Package placement chooses where partition replicas live on a node: which
// log directory holds each new partition, and which partitions move between
// directories to even out their use. It is pure: no I/O, no actors, no
// clocks, no goroutines; callers pass in what they know of the directories
// and act on the answer. Nothing in it keeps state between calls, so every
// function is safe for concurrent use on distinct arguments; no function
// modifies its arguments.
//
// # Placement
//
// Policies share one shape, Policy: given the directories in their configured
// order and a number of new partitions of one topic, return one directory
// path per partition.
//
//   - ByCount is Kafka's rule (LogManager.nextLogDirs): fewest partitions
//     first. Its known failure: a node runs with one directory, the 50
//     partitions of __consumer_offsets and some topics land there, two empty
//     directories are added, and from then on every new partition goes to the
//     new directories until their counts catch up, so they fill while the old
//     one idles.
//   - ByLoad (Load.Place) is the default: it weighs each directory's headroom,
//     its capacity up to the high-water mark minus its projected bytes (see
//     Projection), and spreads the topic's partitions across directories in
//     proportion to that headroom (the D'Hondt, or highest-averages, rule).
//     A pure size rule alone repeats Kafka's failure in reverse (every new
//     partition goes to the newly added empty directory), so the empty
//     directories get more of a topic's partitions, never all of them.
//
// # Balancing
//
// Placement decides only where new partitions go; PlanBalance plans the moves
// that even out what is already there: it brings every directory's used
// fraction (bytes over capacity) within a relative deviation of the node's
// mean and below the high-water mark, and empties draining directories.
// Simulate applies a plan to a description of the directories, for dry runs
// and tests. Carrying a move out (copy into a future log in the target
// directory, catch up, swap, delete the old copy) is the caller's business.
package placement

import (
	"errors"
	"fmt"
	"math/bits"
)

// Sentinel errors of the package, wrapped with %w.
var (
	// ErrNoOnlineDirs is returned when no directory is online (and, for
	// every policy, not draining) to take a partition.
	ErrNoOnlineDirs = errors.New("placement: no online log directory")
	// ErrInvalidCount is returned for a negative number of partitions.
	ErrInvalidCount = errors.New("placement: invalid partition count")
	// ErrNoCapacity is returned by load placement when a directory that
	// could take a partition has no known capacity (Capacity <= 0).
	ErrNoCapacity = errors.New("placement: log directory capacity unknown")
	// ErrInvalidMove is returned by Simulate for a move whose directories or
	// partition are not in the description it was given.
	ErrInvalidMove = errors.New("placement: move does not match the directories")
)

// DefaultHighWater is the fraction of a directory's capacity above which it
// takes new partitions only when every directory is above it, and which
// PlanBalance moves bytes away from: 0.80.
const DefaultHighWater = 0.80

// Dir is what placement knows of one log directory.
type Dir struct {
	// Path names the directory; it is what a policy returns.
	Path string
	// Partitions is the number of partition replicas it holds now.
	Partitions int
	// Bytes is the size of the partitions it holds.
	Bytes int64
	// Online is false once the directory failed; it then takes nothing.
	Online bool
	// Capacity is the directory's size in bytes (its file system's, or the
	// configured PATH=CAPACITY). Load placement needs it > 0 for every
	// directory that may take a partition; ByCount ignores it.
	Capacity int64
	// Draining is true while the directory is being emptied (before its
	// disk is removed); it then takes no new partitions under any policy.
	Draining bool
	// Reserve is the free space the directory keeps: its high-water mark
	// is at most Capacity less twice Reserve (see reserveHigh). 0 means
	// none.
	Reserve int64
	// Projected is the bytes its partitions are expected to hold (the sum of
	// Projection over them). Load placement uses max(Projected, Bytes).
	Projected int64
	// TopicPartitions is the number of partitions of the topic being placed
	// that it already holds (non-zero when partitions are added to an
	// existing topic).
	TopicPartitions int
}

// Policy chooses a directory for each of n new partitions of one topic. The
// result has n paths, the i-th for the i-th partition. dirs is not modified.
type Policy func(dirs []Dir, n int) ([]string, error)

var (
	_ Policy = ByCount
	_ Policy = ByLoad
	_ Policy = Load{}.Place
)

// ByCount is Kafka's placement (LogManager.nextLogDirs): each partition goes
// to the online directory holding the fewest partitions, ties broken by
// directory order, and each choice counts toward the next, so n partitions
// of a new topic spread evenly. Offline and draining directories are
// skipped; bytes, capacity and projections are ignored. It returns
// ErrNoOnlineDirs when none can take a partition (and n > 0),
// ErrInvalidCount when n < 0.
func ByCount(dirs []Dir, n int) ([]string, error) {
	if n < 0 {
		return nil, fmt.Errorf("%w: %d", ErrInvalidCount, n)
	}
	if n == 0 {
		return []string{}, nil
	}
	counts := make([]int, len(dirs))
	usable := 0
	for i, d := range dirs {
		counts[i] = d.Partitions
		if takes(d) {
			usable++
		}
	}
	if usable == 0 {
		return nil, noOnline(dirs)
	}
	chosen := make([]string, 0, n)
	for range n {
		best := -1
		for i, d := range dirs {
			if takes(d) && (best < 0 || counts[i] < counts[best]) {
				best = i
			}
		}
		counts[best]++
		chosen = append(chosen, dirs[best].Path)
	}
	return chosen, nil
}

// takes reports whether a directory may take a new partition.
func takes(d Dir) bool { return d.Online && !d.Draining }

func noOnline(dirs []Dir) error {
	draining := 0
	for _, d := range dirs {
		if d.Online && d.Draining {
			draining++
		}
	}
	return fmt.Errorf("%w (%d configured, %d of them online but draining)", ErrNoOnlineDirs, len(dirs), draining)
}

// Load is load-aware placement. The zero value is usable: HighWater 0.80,
// Expected 0.
//
// Each new partition goes to the online, non-draining directory with the
// greatest
//
//	headroom(d) / (TopicPartitions(d) + 1)
//
// where headroom(d) = Capacity*HighWater - max(Projected, Bytes), the
// high-water mark lowered to Capacity - 2*Reserve where that is less. A directory
// with no headroom left (at or above the high-water mark) is chosen only when
// every directory is; among those, the same quotient is taken over the free
// bytes (Capacity - max(Projected, Bytes), at least 1). Exact ties go to the
// directory with fewer Partitions, then to the earlier one. Each choice adds
// one to that directory's TopicPartitions and Partitions and Expected to its
// projected bytes before the next choice.
//
// The quotient is the D'Hondt (highest averages) rule: n partitions are
// shared out in proportion to headroom, so two directories with headroom
// 2:1 get a topic's partitions about 2:1, equal empty directories get them
// round-robin, and a newly added empty directory gets more of each topic
// than the full ones but not all of it.
type Load struct {
	// HighWater is the fraction of capacity treated as full; values outside
	// (0, 1] mean DefaultHighWater (0.80).
	HighWater float64
	// Expected is the projected size in bytes of one new partition of the
	// topic (Projection of its expected write rate and retention), or 0
	// when unknown; negative means 0.
	Expected int64
}

// ByLoad is Load{}.Place: load-aware placement with the default high-water
// mark and no expected size for the new partitions.
func ByLoad(dirs []Dir, n int) ([]string, error) { return Load{}.Place(dirs, n) }

// Place chooses a directory for each of n new partitions of one topic (see
// Load). It returns ErrInvalidCount when n < 0, ErrNoOnlineDirs when no
// directory is online and not draining (and n > 0), and ErrNoCapacity when
// one that is has Capacity <= 0. dirs is not modified.
func (l Load) Place(dirs []Dir, n int) ([]string, error) {
	if n < 0 {
		return nil, fmt.Errorf("%w: %d", ErrInvalidCount, n)
	}
	if n == 0 {
		return []string{}, nil
	}
	hw := highWater(l.HighWater)
	expected := max(l.Expected, 0)
	type cand struct {
		index      int
		capacity   int64
		high       int64 // Capacity*HighWater, or less for a reserve
		load       int64 // projected bytes
		topic      int64 // TopicPartitions
		partitions int
	}
	cands := make([]cand, 0, len(dirs))
	for i, d := range dirs {
		if !takes(d) {
			continue
		}
		if d.Capacity <= 0 {
			return nil, fmt.Errorf("%w: %q has capacity %d", ErrNoCapacity, d.Path, d.Capacity)
		}
		cands = append(cands, cand{
			index:      i,
			capacity:   d.Capacity,
			high:       reserveHigh(d.Capacity, d.Reserve, hw),
			load:       max(d.Projected, d.Bytes, 0),
			topic:      int64(max(d.TopicPartitions, 0)),
			partitions: d.Partitions,
		})
	}
	if len(cands) == 0 {
		return nil, noOnline(dirs)
	}
	// better reports whether a beats b: below the high-water mark first,
	// then the greater quotient, then fewer partitions, then order.
	better := func(a, b *cand) bool {
		aRoom, bRoom := a.high-a.load, b.high-b.load
		if (aRoom > 0) != (bRoom > 0) {
			return aRoom > 0
		}
		if aRoom <= 0 {
			aRoom, bRoom = max(a.capacity-a.load, 1), max(b.capacity-b.load, 1)
		}
		// aRoom/(a.topic+1) versus bRoom/(b.topic+1), exactly.
		if c := mul(uint64(aRoom), uint64(b.topic+1)).cmp(mul(uint64(bRoom), uint64(a.topic+1))); c != 0 {
			return c > 0
		}
		if a.partitions != b.partitions {
			return a.partitions < b.partitions
		}
		return a.index < b.index
	}
	chosen := make([]string, 0, n)
	for range n {
		best := &cands[0]
		for i := 1; i < len(cands); i++ {
			if better(&cands[i], best) {
				best = &cands[i]
			}
		}
		best.topic++
		best.partitions++
		best.load = satAdd(best.load, expected)
		chosen = append(chosen, dirs[best.index].Path)
	}
	return chosen, nil
}

// highWater returns f if it is a usable high-water fraction, else the default.
func highWater(f float64) float64 {
	if f > 0 && f <= 1 {
		return f
	}
	return DefaultHighWater
}

// highBytes is capacity*fraction in bytes, for capacity > 0 and fraction in (0, 1].
func highBytes(capacity int64, fraction float64) int64 {
	h := float64(capacity) * fraction
	if h >= float64(capacity) {
		return capacity
	}
	return int64(h)
}

// reserveHigh is the high-water mark in bytes of a directory of capacity
// bytes (> 0) that keeps reserve bytes free: capacity*fraction, but never
// above capacity less twice the reserve. A directory under its reserve is
// full and refuses appends, and one under twice its reserve is relieved at
// once (see PlanRelief), so neither placement nor balancing fills one that
// far, whatever high-water mark is asked for.
func reserveHigh(capacity, reserve int64, fraction float64) int64 {
	high := highBytes(capacity, fraction)
	if reserve > 0 {
		limit := capacity - min(reserve, capacity)
		limit -= min(reserve, limit)
		high = min(high, limit)
	}
	return high
}

// satAdd adds two non-negative int64s, saturating at the maximum.
func satAdd(a, b int64) int64 {
	if s := a + b; s >= a {
		return s
	}
	return 1<<63 - 1
}

// u128 is an unsigned 128-bit integer, for exact comparison of products of
// byte counts, which overflow int64.
type u128 struct{ hi, lo uint64 }

func mul(a, b uint64) u128 {
	hi, lo := bits.Mul64(a, b)
	return u128{hi, lo}
}

func (x u128) add(y u128) u128 {
	lo, carry := bits.Add64(x.lo, y.lo, 0)
	hi, _ := bits.Add64(x.hi, y.hi, carry)
	return u128{hi, lo}
}

func (x u128) cmp(y u128) int {
	switch {
	case x.hi != y.hi:
		if x.hi < y.hi {
			return -1
		}
		return 1
	case x.lo != y.lo:
		if x.lo < y.lo {
			return -1
		}
		return 1
	}
	return 0
}
