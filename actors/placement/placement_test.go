package placement

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestByCount(t *testing.T) {
	on := func(path string, partitions int) Dir { return Dir{Path: path, Partitions: partitions, Online: true} }
	off := func(path string, partitions int) Dir { return Dir{Path: path, Partitions: partitions} }
	tests := []struct {
		name    string
		dirs    []Dir
		n       int
		want    []string
		wantErr error
	}{
		{"one dir", []Dir{on("a", 0)}, 3, []string{"a", "a", "a"}, nil},
		{"empty dirs round robin", []Dir{on("a", 0), on("b", 0), on("c", 0)}, 5, []string{"a", "b", "c", "a", "b"}, nil},
		{"ties in directory order", []Dir{on("b", 2), on("a", 2)}, 1, []string{"b"}, nil},
		{"fewest first", []Dir{on("a", 5), on("b", 1), on("c", 3)}, 1, []string{"b"}, nil},
		{"fills the emptiest until even", []Dir{on("a", 3), on("b", 0)}, 4, []string{"b", "b", "b", "a"}, nil},
		{"each choice counts", []Dir{on("a", 1), on("b", 0), on("c", 1)}, 4, []string{"b", "a", "b", "c"}, nil},
		{"offline skipped", []Dir{off("a", 0), on("b", 9)}, 2, []string{"b", "b"}, nil},
		{"offline in the middle", []Dir{on("a", 1), off("b", 0), on("c", 1)}, 3, []string{"a", "c", "a"}, nil},
		{"bytes ignored", []Dir{{Path: "a", Partitions: 1, Bytes: 1, Online: true}, {Path: "b", Partitions: 1, Bytes: 1 << 40, Online: true}}, 1, []string{"a"}, nil},
		{"zero partitions", []Dir{on("a", 0)}, 0, []string{}, nil},
		{"zero partitions no dirs", nil, 0, []string{}, nil},
		{"all offline", []Dir{off("a", 0), off("b", 0)}, 1, nil, ErrNoOnlineDirs},
		{"no dirs", nil, 1, nil, ErrNoOnlineDirs},
		{"negative count", []Dir{on("a", 0)}, -1, nil, ErrInvalidCount},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := append([]Dir(nil), tt.dirs...)
			got, err := ByCount(tt.dirs, tt.n)
			require.Equal(t, before, tt.dirs, "input modified")
			if tt.wantErr != nil {
				require.Error(t, err)
				require.True(t, errors.Is(err, tt.wantErr), err.Error())
				require.Nil(t, got)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

// TestByCountBalances checks the invariant behind the policy: after placing
// n partitions, the online directories' counts differ by at most one unless
// a directory started above the others' final count.
func TestByCountBalances(t *testing.T) {
	for n := 0; n <= 20; n++ {
		dirs := []Dir{{Path: "a", Online: true}, {Path: "b", Online: true}, {Path: "c", Online: true}}
		got, err := ByCount(dirs, n)
		require.NoError(t, err)
		require.Len(t, got, n)
		counts := map[string]int{}
		for _, p := range got {
			counts[p]++
		}
		lo, hi := n, 0
		for _, d := range dirs {
			lo, hi = min(lo, counts[d.Path]), max(hi, counts[d.Path])
		}
		require.LessOrEqual(t, hi-lo, 1, "n=%d counts=%v", n, counts)
	}
}

func TestByCountSkipsDraining(t *testing.T) {
	dirs := []Dir{{Path: "a", Online: true, Draining: true}, {Path: "b", Online: true, Partitions: 7}}
	got, err := ByCount(dirs, 2)
	require.NoError(t, err)
	require.Equal(t, []string{"b", "b"}, got)
	_, err = ByCount(dirs[:1], 1)
	require.ErrorIs(t, err, ErrNoOnlineDirs)
}
