package placement

import (
	"cmp"
	"slices"
)

// Room is a directory as relief planning sees it: its free bytes, its
// reserve, whether it takes partitions, and the partitions it holds.
type Room struct {
	Path    string
	Free    int64
	Reserve int64
	// Accepts is set for a directory that may take a partition (online,
	// not draining, not full).
	Accepts    bool
	Partitions []Growth
}

// Growth is one partition's size and write rate.
type Growth struct {
	Topic          string
	Partition      int32
	Bytes          int64
	WriteBytesPerS float64
}

// PlanRelief plans the moves out of the directory from that bring its free
// space back to target: its fastest-growing partitions first (the larger
// first among equals), each to the accepting directory with the most free
// room that holds it with that directory's reserve to spare. It plans at
// least one move when any partition fits elsewhere, since a directory that
// fills must shed what grows. dirs is not modified.
func PlanRelief(dirs []Room, from string, target int64) []Move {
	i := slices.IndexFunc(dirs, func(d Room) bool { return d.Path == from })
	if i < 0 {
		return nil
	}
	src := dirs[i]
	free := map[string]int64{}
	for _, d := range dirs {
		free[d.Path] = d.Free
	}
	parts := slices.Clone(src.Partitions)
	slices.SortStableFunc(parts, func(a, b Growth) int {
		if c := cmp.Compare(b.WriteBytesPerS, a.WriteBytesPerS); c != 0 {
			return c
		}
		return cmp.Compare(b.Bytes, a.Bytes)
	})
	var moves []Move
	for _, p := range parts {
		if len(moves) > 0 && free[from] >= target {
			break
		}
		best := ""
		for _, d := range dirs {
			if d.Path == from || !d.Accepts || free[d.Path]-p.Bytes < d.Reserve {
				continue
			}
			if best == "" || free[d.Path] > free[best] {
				best = d.Path
			}
		}
		if best == "" {
			continue
		}
		moves = append(moves, Move{Topic: p.Topic, Partition: p.Partition, From: from, To: best, Bytes: p.Bytes})
		free[best] -= p.Bytes
		free[from] += p.Bytes
	}
	return moves
}
