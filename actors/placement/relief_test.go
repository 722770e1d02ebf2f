package placement

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPlanRelief(t *testing.T) {
	full := Room{Path: "/small", Free: 5, Reserve: 10, Partitions: []Growth{
		{Topic: "t", Partition: 0, Bytes: 40, WriteBytesPerS: 1},
		{Topic: "t", Partition: 1, Bytes: 20, WriteBytesPerS: 100},
		{Topic: "t", Partition: 2, Bytes: 30, WriteBytesPerS: 100},
	}}
	big := Room{Path: "/big", Free: 1000, Reserve: 50, Accepts: true}
	for _, tc := range []struct {
		name   string
		dirs   []Room
		target int64
		want   []Move
	}{
		{"fastest first, the larger among equals, until the target", []Room{full, big}, 40, []Move{
			{Topic: "t", Partition: 2, From: "/small", To: "/big", Bytes: 30},
			{Topic: "t", Partition: 1, From: "/small", To: "/big", Bytes: 20},
		}},
		{"at least one move though the target is met", []Room{full, big}, 0, []Move{
			{Topic: "t", Partition: 2, From: "/small", To: "/big", Bytes: 30},
		}},
		{"only to a dir that accepts", []Room{full, {Path: "/draining", Free: 1000}}, 40, nil},
		{"only what fits with the target's reserve to spare", []Room{full, {Path: "/tight", Free: 45, Reserve: 20, Accepts: true}}, 100, []Move{
			{Topic: "t", Partition: 1, From: "/small", To: "/tight", Bytes: 20},
		}},
		{"to the dir with the most room", []Room{full, {Path: "/a", Free: 100, Accepts: true}, {Path: "/b", Free: 200, Accepts: true}}, 0, []Move{
			{Topic: "t", Partition: 2, From: "/small", To: "/b", Bytes: 30},
		}},
		{"unknown dir", []Room{big}, 10, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, PlanRelief(tc.dirs, "/small", tc.target))
		})
	}
}
