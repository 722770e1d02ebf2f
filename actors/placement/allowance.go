package placement

import (
	"cmp"
	"slices"
)

// Allowances enforce a log directory's declared capacity exactly. The
// directory's partitions append on their own, between reports, so a check
// of the reported sizes against the capacity lets a burst overshoot it.
// Instead each partition holds an allowance, a ceiling on its log's size,
// and refuses an append that would take it past that; the directory hands
// out ceilings so that, whatever its partitions append, their sizes never
// add up to more than its limit (capacity less reserve).
//
// A ceiling raised counts from the moment it is sent; one lowered counts
// at its old value until the partition acknowledges it, since until then
// the partition may append up to the old one. So the sum of every
// partition's bound, max(size, ceiling acknowledged, ceiling pending), is
// at most the limit at all times, and a partition's true size is at most
// its bound.

const (
	// AllowanceHorizon is how many seconds of a partition's write rate
	// weigh in its share of the room.
	AllowanceHorizon = 2
	// MinAllowanceWeight is the weight, in bytes, of a partition that
	// writes nothing and wants nothing, so that each has some room to
	// start writing in.
	MinAllowanceWeight = 64 << 10
)

// AllowanceHolder is one partition of a directory as allowance planning
// sees it.
type AllowanceHolder struct {
	// Size is the partition's size at its last report.
	Size int64
	// Ceiling is the allowance it acknowledged, -1 when it has none yet
	// (it waits for its first).
	Ceiling int64
	// Pending is a ceiling sent and not acknowledged yet, -1 when none.
	Pending int64
	// Wanted is the largest append it refused since its last append.
	Wanted int64
	// WriteBytesPerS is its write rate.
	WriteBytesPerS float64
	// Fixed is set for a partition that appends nothing (it stopped, or
	// takes no allowance): it counts by its size and gets no ceiling.
	Fixed bool
}

// Bound is the most bytes the partition may hold before its next report:
// its size, or the highest ceiling it may be appending under.
func (h AllowanceHolder) Bound() int64 {
	if h.Fixed {
		return h.Size
	}
	return max(h.Size, h.Ceiling, h.Pending)
}

// AllowancePlan is what PlanAllowances decides.
type AllowancePlan struct {
	// Ceilings has, for each holder, the ceiling to send it, or -1.
	Ceilings []int64
	// Room is the limit less every holder's size: what the directory could
	// still take if every unused allowance were given back.
	Room int64
	// Short is set when some holder wants more than Room: an append that
	// does not fit in the directory at all, which is then full.
	Short bool
}

// PlanAllowances shares out limit between holders. The room (the limit
// less their sizes) goes first to what they want, each want whole in
// turn while it fits (the largest first), then in proportion to their
// weights: AllowanceHorizon seconds of write rate plus MinAllowanceWeight.
// A holder's target ceiling is its size plus its share.
//
// A holder with no ceiling yet, one that wants more, or one that has used
// more than half of its share is raised to its target, as far as the room
// not yet allowed to anyone lets it: first those with none, then by what
// they want, by how far short of their share they are, and by order. A
// holder with more than twice its share unused (and minAllowanceChange
// more than its share) is lowered to its target, as is one with anything
// more than its share unused while a raise falls short; a lowered ceiling
// counts once acknowledged. A holder with a ceiling
// pending gets nothing new until it acknowledges it. holders is not
// modified.
func PlanAllowances(limit int64, holders []AllowanceHolder) AllowancePlan {
	plan := AllowancePlan{Ceilings: make([]int64, len(holders)), Room: limit}
	var bound int64
	for i, h := range holders {
		plan.Ceilings[i] = -1
		plan.Room -= h.Size
		bound += h.Bound()
	}
	shares := allowanceShares(plan.Room, holders)
	free := limit - bound
	var raise []int
	for i, h := range holders {
		if h.Fixed {
			continue
		}
		if h.Wanted > 0 && h.Wanted > plan.Room {
			plan.Short = true
		}
		if h.Pending < 0 && (h.Ceiling < 0 || h.Wanted > 0 || h.Ceiling-h.Size < shares[i]/2) {
			raise = append(raise, i)
		}
	}
	slices.SortStableFunc(raise, func(a, b int) int {
		ha, hb := holders[a], holders[b]
		if c := cmp.Compare(min(ha.Ceiling, 0), min(hb.Ceiling, 0)); c != 0 {
			return c // none yet first
		}
		if c := cmp.Compare(hb.Wanted, ha.Wanted); c != 0 {
			return c
		}
		return cmp.Compare(shares[b]-(hb.Ceiling-hb.Size), shares[a]-(ha.Ceiling-ha.Size))
	})
	shortfall := false
	for _, i := range raise {
		h := holders[i]
		b := h.Bound()
		target := h.Size + shares[i]
		ceiling := min(target, b+max(free, 0))
		shortfall = shortfall || ceiling < target
		if h.Ceiling >= 0 && ceiling <= h.Ceiling {
			continue
		}
		plan.Ceilings[i] = ceiling
		free -= max(ceiling-b, 0)
	}
	for i, h := range holders {
		if !shortfall || h.Fixed || h.Pending >= 0 || h.Ceiling < 0 || plan.Ceilings[i] >= 0 {
			continue
		}
		if h.Ceiling-h.Size > shares[i] {
			plan.Ceilings[i] = h.Size + shares[i]
		}
	}
	return plan
}

// allowanceShares shares room out between holders: each want whole while
// it fits, the largest first, then the rest by weight (see
// PlanAllowances). Fixed holders get nothing.
func allowanceShares(room int64, holders []AllowanceHolder) []int64 {
	shares := make([]int64, len(holders))
	if room <= 0 {
		return shares
	}
	wanting := make([]int, 0, len(holders))
	for i, h := range holders {
		if !h.Fixed && h.Wanted > 0 {
			wanting = append(wanting, i)
		}
	}
	slices.SortStableFunc(wanting, func(a, b int) int { return cmp.Compare(holders[b].Wanted, holders[a].Wanted) })
	for _, i := range wanting {
		if w := holders[i].Wanted; w <= room {
			shares[i] = w
			room -= w
		}
	}
	weights := make([]float64, len(holders))
	var total float64
	for i, h := range holders {
		if !h.Fixed {
			weights[i] = max(h.WriteBytesPerS, 0)*AllowanceHorizon + MinAllowanceWeight
			total += weights[i]
		}
	}
	for i := range holders {
		if weights[i] > 0 {
			shares[i] += int64(float64(room) * weights[i] / total)
		}
	}
	return shares
}
