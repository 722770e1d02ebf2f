package placement

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPlanAllowances(t *testing.T) {
	idle := func(size, ceiling int64) AllowanceHolder {
		return AllowanceHolder{Size: size, Ceiling: ceiling, Pending: -1}
	}
	for _, tc := range []struct {
		name    string
		limit   int64
		holders []AllowanceHolder
		want    []int64
		room    int64
		short   bool
	}{
		{name: "new holders share the room equally", limit: 3 << 20,
			holders: []AllowanceHolder{idle(0, -1), idle(1<<20, -1)},
			want:    []int64{1 << 20, 2 << 20}, room: 2 << 20},
		{name: "a writer gets the room in proportion to its rate", limit: 10 << 20,
			holders: []AllowanceHolder{
				{Ceiling: -1, Pending: -1, WriteBytesPerS: 3 * MinAllowanceWeight / AllowanceHorizon},
				idle(0, -1)},
			// weights 3 + 1 : 1
			want: []int64{8 << 20, 2 << 20}, room: 10 << 20},
		{name: "no room: a new holder gets its size, so that it refuses appends", limit: 100,
			holders: []AllowanceHolder{idle(60, 60), idle(70, -1)},
			want:    []int64{-1, 70}, room: -30},
		{name: "within half its share, nothing is sent", limit: 1 << 20,
			holders: []AllowanceHolder{idle(0, 400<<10), idle(0, 400<<10)},
			want:    []int64{-1, -1}, room: 1 << 20},
		{name: "a want is met whole though others hold the room, by lowering them", limit: 1 << 20,
			holders: []AllowanceHolder{
				{Size: 0, Ceiling: 0, Pending: -1, Wanted: 600 << 10},
				idle(0, 512<<10), idle(0, 512<<10)},
			// 600 KiB for the want, the other 424 KiB in three: the want
			// waits for the lowers to be acknowledged
			want: []int64{-1, 424 << 10 / 3, 424 << 10 / 3}, room: 1 << 20},
		{name: "the want is met once the lowers are acknowledged", limit: 1 << 20,
			holders: []AllowanceHolder{
				{Size: 0, Ceiling: 0, Pending: -1, Wanted: 600 << 10},
				idle(0, 424<<10/3), idle(0, 424<<10/3)},
			want: []int64{600<<10 + 424<<10/3, -1, -1}, room: 1 << 20},
		{name: "a want larger than the room is short", limit: 1 << 20,
			holders: []AllowanceHolder{{Size: 1000 << 10, Ceiling: 1000 << 10, Pending: -1, Wanted: 100 << 10}},
			want:    []int64{1 << 20}, room: 24 << 10, short: true},
		{name: "a pending ceiling waits for its acknowledgement", limit: 1 << 20,
			holders: []AllowanceHolder{{Ceiling: -1, Pending: 10, Wanted: 100}, idle(0, -1)},
			// the first's want comes out of the room before the second's
			// half of the rest
			want: []int64{-1, ((1 << 20) - 100) / 2}, room: 1 << 20},
		{name: "fixed holders count by their size and get nothing", limit: 1 << 20,
			holders: []AllowanceHolder{{Size: 512 << 10, Ceiling: -1, Pending: -1, Fixed: true}, idle(0, -1)},
			want:    []int64{-1, 512 << 10}, room: 512 << 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := append([]AllowanceHolder(nil), tc.holders...)
			plan := PlanAllowances(tc.limit, tc.holders)
			require.Equal(t, before, tc.holders, "input modified")
			require.Equal(t, tc.want, plan.Ceilings)
			require.Equal(t, tc.room, plan.Room)
			require.Equal(t, tc.short, plan.Short)
		})
	}
}

// A directory and its partitions driven in random order: appends within
// each partition's ceiling, reports, allowances delivered late, retention.
// However the messages interleave, the partitions' true sizes never add
// up to more than the limit, and a partition that wants room the
// directory has gets it once the others have answered.
func TestPlanAllowancesNeverOvershoots(t *testing.T) {
	const limit = 1 << 20
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 7))
		type partition struct {
			size    int64   // true size
			ceiling int64   // the one it appends under, -1 none
			inbox   []int64 // ceilings sent to it, in order
			wanted  int64
		}
		n := 1 + rng.IntN(6)
		parts := make([]partition, n)
		view := make([]AllowanceHolder, n)
		for i := range parts {
			parts[i].ceiling = -1
			view[i] = AllowanceHolder{Ceiling: -1, Pending: -1}
		}
		report := func(i int) {
			p := &parts[i]
			view[i].Size, view[i].Wanted = p.size, p.wanted
		}
		deliver := func(i int) {
			p := &parts[i]
			p.ceiling, p.inbox = p.inbox[0], p.inbox[1:]
			report(i)
			if len(p.inbox) == 0 {
				view[i].Ceiling, view[i].Pending = p.ceiling, -1
			}
		}
		plan := func() {
			for i, c := range PlanAllowances(limit, view).Ceilings {
				if c >= 0 {
					parts[i].inbox = append(parts[i].inbox, c)
					view[i].Pending = c
				}
			}
		}
		total := func() (sum int64) {
			for _, p := range parts {
				sum += p.size
			}
			return sum
		}
		for range 2000 {
			i := rng.IntN(n)
			p := &parts[i]
			switch rng.IntN(5) {
			case 0, 1:
				size := 1 + rng.Int64N(64<<10)
				if p.ceiling >= 0 && p.size+size <= p.ceiling {
					p.size += size
					p.wanted = 0
				} else {
					p.wanted = max(p.wanted, size)
				}
			case 2:
				if len(p.inbox) > 0 {
					deliver(i)
				} else {
					report(i)
				}
			case 3:
				plan()
			case 4:
				if rng.IntN(10) == 0 {
					p.size /= 2
				}
			}
			require.LessOrEqual(t, total(), int64(limit), "seed %d", seed)
		}

		// Quiet now: one partition wants what the room has, the others
		// answer every allowance, and it gets it.
		for i := range parts {
			for len(parts[i].inbox) > 0 {
				deliver(i)
			}
			parts[i].wanted = 0
			report(i)
		}
		room := limit - total()
		if room <= 0 {
			continue
		}
		want := room
		parts[0].wanted = want
		report(0)
		for range 4 {
			plan()
			for i := range parts {
				for len(parts[i].inbox) > 0 {
					deliver(i)
				}
			}
			if parts[0].ceiling-parts[0].size >= want {
				break
			}
			parts[0].wanted = want
			report(0)
		}
		require.GreaterOrEqual(t, parts[0].ceiling-parts[0].size, want, "seed %d: the want was not met", seed)
		require.LessOrEqual(t, total(), int64(limit))
	}
}
