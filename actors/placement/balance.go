package placement

import (
	"cmp"
	"fmt"
	"math"
	"slices"
)

// PartitionLoad is one partition replica held in a directory.
type PartitionLoad struct {
	Topic     string
	Partition int32
	// Bytes is its size now: what a move copies.
	Bytes int64
	// Projected is its expected size (see Projection); 0 when unknown.
	Projected int64
}

// DirLoad is one log directory and the partitions it holds, as the log-dir
// actor reports it.
type DirLoad struct {
	Path string
	// Capacity is the directory's size in bytes; a directory that is online,
	// not draining and has Capacity <= 0 is left out of balancing.
	Capacity int64
	// Online is false once the directory failed: its partitions cannot be
	// read, so balancing ignores it entirely.
	Online bool
	// Draining is true while everything in the directory is to be moved out.
	Draining bool
	// Reserve is the free space the directory keeps (its --disk-reserve):
	// its high-water mark is at most Capacity less twice Reserve (see
	// reserveHigh). 0 means none.
	Reserve    int64
	Partitions []PartitionLoad
}

// DirsFor summarises directories for placing new partitions of topic: each
// Dir carries the partition count, bytes, projected bytes (the sum over its
// partitions of max(Projected, Bytes)) and the number of partitions of topic
// the directory holds.
func DirsFor(loads []DirLoad, topic string) []Dir {
	dirs := make([]Dir, len(loads))
	for i, l := range loads {
		d := Dir{Path: l.Path, Partitions: len(l.Partitions), Online: l.Online, Capacity: l.Capacity, Draining: l.Draining, Reserve: l.Reserve}
		for _, p := range l.Partitions {
			d.Bytes = satAdd(d.Bytes, max(p.Bytes, 0))
			d.Projected = satAdd(d.Projected, max(p.Projected, p.Bytes, 0))
			if p.Topic == topic {
				d.TopicPartitions++
			}
		}
		dirs[i] = d
	}
	return dirs
}

// Balancing defaults, used for zero fields of BalanceConfig.
const (
	// DefaultMaxDeviation: every directory's used fraction within 10%
	// (relative) of the node's mean fraction.
	DefaultMaxDeviation = 0.10
	// DefaultMinMoveBytes: imbalances of less than 64 MiB are ignored.
	DefaultMinMoveBytes = 64 << 20
)

// BalanceConfig tunes PlanBalance. The zero value means the defaults.
type BalanceConfig struct {
	// MaxDeviation is how far, relative to the mean, a directory's used
	// fraction may be from the node's mean fraction: 0.10 means a mean of
	// 50% allows 45% to 55%. Values <= 0 (or NaN) mean DefaultMaxDeviation.
	MaxDeviation float64
	// HighWater is the used fraction every directory is brought below when
	// the node's mean is below it. Values outside (0, 1] mean
	// DefaultHighWater (0.80). A directory with a Reserve is brought below
	// the lower of it and its capacity less twice its reserve.
	HighWater float64
	// MinMoveBytes: a directory whose bytes are off its share by less than
	// this is within tolerance whatever MaxDeviation says, so that small
	// directories do not thrash. 0 means DefaultMinMoveBytes (64 MiB);
	// negative means no minimum.
	MinMoveBytes int64
	// UseProjected balances projected sizes (max(Projected, Bytes) per
	// partition) instead of current ones. Move.Bytes is current bytes either way.
	UseProjected bool
}

func (c BalanceConfig) withDefaults() BalanceConfig {
	if !(c.MaxDeviation > 0) {
		c.MaxDeviation = DefaultMaxDeviation
	}
	c.HighWater = highWater(c.HighWater)
	switch {
	case c.MinMoveBytes == 0:
		c.MinMoveBytes = DefaultMinMoveBytes
	case c.MinMoveBytes < 0:
		c.MinMoveBytes = 0
	}
	return c
}

// Move is one partition to move between directories of a node.
type Move struct {
	Topic     string
	Partition int32
	From, To  string
	// Bytes is the partition's current size: what the move copies.
	Bytes int64
}

// PlanBalance plans the moves that even out a node's log directories. dirs
// is not modified; the plan is deterministic for a given input (directory
// order and the order of partitions within a directory break ties).
//
// Offline directories are ignored: their partitions cannot be read. The
// directories that take part are the online, non-draining ones with
// Capacity > 0; the others neither give nor take (an online directory with
// unknown capacity keeps what it has).
//
// First, everything in an online draining directory moves out, largest
// partition first, each to the directory whose used fraction is lowest after
// taking it, preferring directories that stay at or below the high-water
// mark. With no directory to take them, the partitions stay and the plan has
// no move for them.
//
// Then, with m the node's mean used fraction (total bytes over total
// capacity of the directories that take part), a directory is out of
// tolerance when its bytes are more than max(MaxDeviation*m*Capacity,
// MinMoveBytes) off its share m*Capacity, or, when m is at or below the
// high-water mark, when its bytes are above HighWater*Capacity. While some
// directory is out of tolerance, the plan takes the single move that most
// reduces the imbalance
//
//	sum over directories of Capacity * (fraction - m)^2
//
// among moves from a fuller directory to an emptier one where the source
// is above tolerance or the destination below it, subject to:
//
//   - the move strictly reduces the imbalance;
//   - no overshoot: the source does not end below the destination's
//     fraction before the move, nor the destination above the source's;
//   - when m is at or below the high-water mark, the destination does not
//     end above it;
//   - no partition moves twice in one plan (what a draining directory gave
//     up stays where it went).
//
// Moves that leave both directories inside their tolerance band (the source
// not below it, the destination not above it) are preferred to moves that
// reduce the imbalance more but push a directory out of its band, which a
// partition moved once could not then correct. For a pair of directories
// the best partition is the one whose size is closest to the size that
// would equalise their fractions, so one 10 GiB partition that fixes an
// imbalance is preferred over ten of 1 GiB. Each
// move fixes one partition, so the plan has at most as many moves as there
// are partitions and always terminates; the no-overshoot rule keeps every
// fraction within the range it started in, so the largest deviation from
// the mean never grows, and since every plan strictly lowers the imbalance,
// planning again after a plan is carried out cannot undo it. It is a greedy
// heuristic: moving the fewest bytes exactly is a bin-packing problem, and a
// partition larger than an imbalance is left where it is rather than moved
// back and forth, so a plan may end with directories still out of
// tolerance.
func PlanBalance(dirs []DirLoad, cfg BalanceConfig) []Move {
	cfg = cfg.withDefaults()
	p := newPlanner(dirs, cfg)
	p.drain()
	p.balance()
	return p.moves
}

// item is one movable partition.
type item struct {
	dir, index int   // position in the input
	size       int64 // what balancing counts
}

// dirState is a directory taking part in a plan.
type dirState struct {
	index    int // position in the input
	capacity int64
	high     int64 // HighWater*Capacity, or less for a reserve (reserveHigh)
	bytes    int64 // sum of sizes it holds, after the moves so far
	movable  []item
}

type planner struct {
	input    []DirLoad
	cfg      BalanceConfig
	dirs     []*dirState // taking part, in input order
	drainIdx []int       // input indexes of online draining dirs
	moves    []Move
}

func newPlanner(input []DirLoad, cfg BalanceConfig) *planner {
	p := &planner{input: input, cfg: cfg}
	for i, d := range input {
		switch {
		case !d.Online:
		case d.Draining:
			p.drainIdx = append(p.drainIdx, i)
		case d.Capacity > 0:
			s := &dirState{index: i, capacity: d.Capacity, high: reserveHigh(d.Capacity, d.Reserve, cfg.HighWater)}
			for j := range d.Partitions {
				it := item{dir: i, index: j, size: p.size(d.Partitions[j])}
				s.bytes = satAdd(s.bytes, it.size)
				s.movable = append(s.movable, it)
			}
			slices.SortStableFunc(s.movable, func(a, b item) int { return cmp.Compare(a.size, b.size) })
			p.dirs = append(p.dirs, s)
		}
	}
	return p
}

// size is what balancing counts for a partition.
func (p *planner) size(pl PartitionLoad) int64 {
	if p.cfg.UseProjected {
		return max(pl.Projected, pl.Bytes, 0)
	}
	return max(pl.Bytes, 0)
}

// record appends the move of it to the plan and counts it in to.
func (p *planner) record(it item, to *dirState) {
	from := p.input[it.dir]
	pl := from.Partitions[it.index]
	p.moves = append(p.moves, Move{
		Topic: pl.Topic, Partition: pl.Partition,
		From: from.Path, To: p.input[to.index].Path,
		Bytes: max(pl.Bytes, 0),
	})
	to.bytes = satAdd(to.bytes, it.size)
}

// drain moves everything out of the online draining directories.
func (p *planner) drain() {
	if len(p.dirs) == 0 {
		return
	}
	for _, di := range p.drainIdx {
		d := p.input[di]
		items := make([]item, len(d.Partitions))
		for j, pl := range d.Partitions {
			items[j] = item{dir: di, index: j, size: p.size(pl)}
		}
		slices.SortStableFunc(items, func(a, b item) int { return cmp.Compare(b.size, a.size) })
		for _, it := range items {
			var best *dirState
			bestFits := false
			for _, s := range p.dirs {
				after := satAdd(s.bytes, it.size)
				fits := after <= s.high
				switch {
				case best == nil, fits && !bestFits:
				case fits == bestFits && fractionLess(after, s.capacity, satAdd(best.bytes, it.size), best.capacity):
				default:
					continue
				}
				best, bestFits = s, fits
			}
			p.record(it, best)
		}
	}
}

// fractionLess reports whether a/ca < b/cb, exactly, for non-negative a, b
// and positive ca, cb.
func fractionLess(a, ca, b, cb int64) bool {
	return mul(uint64(a), uint64(cb)).cmp(mul(uint64(b), uint64(ca))) < 0
}

// balance moves partitions between the directories taking part until none
// is out of tolerance or no move helps.
func (p *planner) balance() {
	if len(p.dirs) < 2 {
		return
	}
	var total, capacity int64
	for _, d := range p.dirs {
		total = satAdd(total, d.bytes)
		capacity = satAdd(capacity, d.capacity)
	}
	mean := float64(total) / float64(capacity)
	useHigh := mean <= p.cfg.HighWater
	// Each directory's tolerance band, [low, high] in bytes.
	low := make([]float64, len(p.dirs))
	high := make([]float64, len(p.dirs))
	for i, d := range p.dirs {
		share := mean * float64(d.capacity)
		tolerance := max(p.cfg.MaxDeviation*share, float64(p.cfg.MinMoveBytes))
		low[i], high[i] = share-tolerance, share+tolerance
	}
	over := make([]bool, len(p.dirs))
	under := make([]bool, len(p.dirs))
	for {
		outside := false
		for i, d := range p.dirs {
			over[i] = float64(d.bytes) > high[i] || (useHigh && d.bytes > d.high)
			under[i] = float64(d.bytes) < low[i]
			outside = outside || over[i] || under[i]
		}
		if !outside {
			return
		}
		var best struct {
			from, to *dirState
			position int
			clean    bool
			gain     float64
		}
		for i, a := range p.dirs {
			if len(a.movable) == 0 {
				continue
			}
			for j, b := range p.dirs {
				if i == j || !(over[i] || under[j]) || !fractionLess(b.bytes, b.capacity, a.bytes, a.capacity) {
					continue
				}
				// A clean move puts neither directory out of its band:
				// the source not below it, the destination not above it.
				clean := math.Inf(1)
				if !under[i] {
					clean = float64(a.bytes) - low[i]
				}
				if !over[j] {
					clean = min(clean, high[j]-float64(b.bytes))
				}
				for _, isClean := range []bool{true, false} {
					upper := math.Inf(1)
					if isClean {
						upper = clean
					}
					position, gain := p.bestItem(a, b, upper, useHigh)
					if position < 0 {
						continue
					}
					if best.from == nil || (isClean && !best.clean) || (isClean == best.clean && gain > best.gain) {
						best.from, best.to, best.position, best.clean, best.gain = a, b, position, isClean, gain
					}
					break
				}
			}
		}
		if best.from == nil {
			return
		}
		it := best.from.movable[best.position]
		best.from.movable = slices.Delete(best.from.movable, best.position, best.position+1)
		best.from.bytes -= it.size
		p.record(it, best.to)
	}
}

// bestItem finds the partition of a of at most upper bytes whose move to b
// most reduces the imbalance: its position in a.movable (-1 if no move is
// allowed) and the reduction. a is fuller than b. The reduction is a
// parabola in the size, highest at the size that equalises the two
// fractions, and every rule of PlanBalance bounds the size from above, so
// the candidates are the largest allowed size at or below that point and
// the smallest above it.
func (p *planner) bestItem(a, b *dirState, upper float64, useHigh bool) (int, float64) {
	ca, cb := float64(a.capacity), float64(b.capacity)
	delta := float64(a.bytes)/ca - float64(b.bytes)/cb
	weight := 1/ca + 1/cb
	equalising := delta / weight
	improvement := func(size int64) float64 {
		s := float64(size)
		return s * (2*delta - s*weight)
	}
	if useHigh {
		upper = min(upper, float64(b.high-b.bytes))
	}
	sizes := a.movable
	// firstAbove is the first position with a size above l.
	firstAbove := func(l float64) int {
		k, _ := slices.BinarySearchFunc(sizes, l, func(it item, l float64) int {
			if float64(it.size) <= l {
				return -1
			}
			return 1
		})
		return k
	}
	position, gain := -1, 0.0
	consider := func(k int) bool {
		// k is the first of its size: the earliest partition in input order.
		if float64(sizes[k].size) > upper || !p.allowed(a, b, sizes[k].size, useHigh) {
			return false
		}
		if g := improvement(sizes[k].size); position < 0 || g > gain {
			position, gain = k, g
		}
		return true
	}
	// Largest allowed size at or below the equalising size and the upper
	// bound; a few steps down absorb rounding in the float bounds.
	for k, steps := firstAbove(min(equalising, upper))-1, 0; k >= 0 && steps < 3; steps++ {
		k = firstOfSize(sizes, k)
		if consider(k) {
			break
		}
		k--
	}
	// Smallest size above the equalising size, and the next in case of
	// rounding.
	for k, steps := firstAbove(equalising), 0; k < len(sizes) && steps < 2; steps++ {
		if consider(k) {
			break
		}
		k = lastOfSize(sizes, k) + 1
	}
	return position, gain
}

func firstOfSize(sizes []item, k int) int {
	for k > 0 && sizes[k-1].size == sizes[k].size {
		k--
	}
	return k
}

func lastOfSize(sizes []item, k int) int {
	for k+1 < len(sizes) && sizes[k+1].size == sizes[k].size {
		k++
	}
	return k
}

// allowed reports, exactly, whether moving size bytes from a to b obeys the
// rules of PlanBalance: it strictly reduces the imbalance, neither directory
// overshoots the other's fraction, and b stays at or below the high-water
// mark when that applies.
func (p *planner) allowed(a, b *dirState, size int64, useHigh bool) bool {
	if size <= 0 || size > a.bytes {
		return false
	}
	if useHigh && satAdd(b.bytes, size) > b.high {
		return false
	}
	s, ba, bb := uint64(size), uint64(a.bytes), uint64(b.bytes)
	ca, cb := uint64(a.capacity), uint64(b.capacity)
	// Imbalance reduced: s*(ca+cb) < 2*(ba*cb - bb*ca).
	left := mul(s, ca).add(mul(s, cb)).add(mul(bb, ca)).add(mul(bb, ca))
	right := mul(ba, cb).add(mul(ba, cb))
	if left.cmp(right) >= 0 {
		return false
	}
	// Source not below b's fraction: (ba-s)*cb >= bb*ca.
	if mul(ba-s, cb).cmp(mul(bb, ca)) < 0 {
		return false
	}
	// Destination not above a's fraction: (bb+s)*ca <= ba*cb.
	return mul(bb+s, ca).cmp(mul(ba, cb)) <= 0
}

// Simulate returns the directories as they would be after the moves, in
// order: each partition leaves From and is appended to To. dirs is not
// modified. It returns ErrInvalidMove for a move whose From or To is not a
// directory of dirs, whose From equals its To, or whose partition is not in
// From (by topic and partition) at that point.
func Simulate(dirs []DirLoad, moves []Move) ([]DirLoad, error) {
	out := make([]DirLoad, len(dirs))
	index := make(map[string]int, len(dirs))
	for i, d := range dirs {
		d.Partitions = slices.Clone(d.Partitions)
		out[i] = d
		if _, ok := index[d.Path]; !ok {
			index[d.Path] = i
		}
	}
	for n, m := range moves {
		from, okFrom := index[m.From]
		to, okTo := index[m.To]
		if !okFrom || !okTo || from == to {
			return nil, fmt.Errorf("%w: move %d: %s-%d from %q to %q", ErrInvalidMove, n, m.Topic, m.Partition, m.From, m.To)
		}
		j := slices.IndexFunc(out[from].Partitions, func(p PartitionLoad) bool {
			return p.Topic == m.Topic && p.Partition == m.Partition
		})
		if j < 0 {
			return nil, fmt.Errorf("%w: move %d: %s-%d is not in %q", ErrInvalidMove, n, m.Topic, m.Partition, m.From)
		}
		pl := out[from].Partitions[j]
		out[from].Partitions = slices.Delete(out[from].Partitions, j, j+1)
		out[to].Partitions = append(out[to].Partitions, pl)
	}
	return out, nil
}
