package disks

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/depot-dev/depot/disk"
)

func TestRecoverMoves(t *testing.T) {
	orders0 := disk.TopicPartition{Topic: "orders", Partition: 0}
	orders1 := disk.TopicPartition{Topic: "orders", Partition: 1}
	dashed := disk.TopicPartition{Topic: "my-topic", Partition: 12}
	remove := func(p string) MoveAction { return MoveAction{Kind: MoveRemove, Path: p} }
	rename := func(p, to string) MoveAction { return MoveAction{Kind: MoveRename, Path: p, To: to} }
	tests := []struct {
		name      string
		a, b      []string // entries of /a and /b
		actions   []MoveAction
		locations map[disk.TopicPartition]string
		err       []string // substrings of the error
	}{
		{
			name:      "no move",
			a:         []string{"orders-0", "recovery-point-offset-checkpoint", "log-start-offset-checkpoint"},
			b:         []string{"orders-1", "log-start-offset-checkpoint.tmp"},
			locations: map[disk.TopicPartition]string{orders0: "/a", orders1: "/b"},
		},
		{
			name:      "S1 copying: the future goes",
			a:         []string{"orders-0"},
			b:         []string{"orders-0.future"},
			actions:   []MoveAction{remove("/b/orders-0.future")},
			locations: map[disk.TopicPartition]string{orders0: "/a"},
		},
		{
			name:      "S2 swapping: the future is promoted, then the old copy goes",
			a:         []string{"orders-0.delete"},
			b:         []string{"orders-0.future"},
			actions:   []MoveAction{rename("/b/orders-0.future", "/b/orders-0"), remove("/a/orders-0.delete")},
			locations: map[disk.TopicPartition]string{orders0: "/b"},
		},
		{
			name:      "S3 promoted: the old copy goes",
			a:         []string{"orders-0.delete"},
			b:         []string{"orders-0"},
			actions:   []MoveAction{remove("/a/orders-0.delete")},
			locations: map[disk.TopicPartition]string{orders0: "/b"},
		},
		{
			name:      "S4 done",
			b:         []string{"orders-0"},
			locations: map[disk.TopicPartition]string{orders0: "/b"},
		},
		{
			name:      "future with neither source nor old copy is incomplete",
			b:         []string{"orders-0.future"},
			actions:   []MoveAction{remove("/b/orders-0.future")},
			locations: map[disk.TopicPartition]string{},
		},
		{
			name:      "lone old copy is the only data and comes back",
			a:         []string{"orders-0.delete"},
			actions:   []MoveAction{rename("/a/orders-0.delete", "/a/orders-0")},
			locations: map[disk.TopicPartition]string{orders0: "/a"},
		},
		{
			name:      "future beside its own primary goes",
			a:         []string{"orders-0", "orders-0.future"},
			actions:   []MoveAction{remove("/a/orders-0.future")},
			locations: map[disk.TopicPartition]string{orders0: "/a"},
		},
		{
			name:      "topic with dashes, moves of two partitions at once",
			a:         []string{"my-topic-12.delete", "orders-1"},
			b:         []string{"my-topic-12.future", "orders-1.future"},
			actions:   []MoveAction{rename("/b/my-topic-12.future", "/b/my-topic-12"), remove("/a/my-topic-12.delete"), remove("/b/orders-1.future")},
			locations: map[disk.TopicPartition]string{dashed: "/b", orders1: "/a"},
		},
		{
			name:      "names that are not partitions are ignored",
			a:         []string{"orders-00.future", "orders.delete", "-1.future", "orders-x", "lost+found"},
			locations: map[disk.TopicPartition]string{},
		},
		{
			name: "two primaries refuse, naming both",
			a:    []string{"orders-0"},
			b:    []string{"orders-0", "orders-1"},
			err:  []string{"/a/orders-0", "/b/orders-0", "disks: inconsistent partition copies"},
		},
		{
			name: "old copy and two futures refuse",
			a:    []string{"orders-0.delete", "orders-0.future"},
			b:    []string{"orders-0.future"},
			err:  []string{"orders-0", "/a and /b"},
		},
		{
			name: "two lone old copies refuse",
			a:    []string{"orders-0.delete"},
			b:    []string{"orders-0.delete"},
			err:  []string{"only old copies"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := RecoverMoves([]LogDirListing{{Dir: "/a", Names: tt.a}, {Dir: "/b", Names: tt.b}})
			if tt.err != nil {
				require.ErrorIs(t, err, ErrMoveState)
				for _, s := range tt.err {
					require.ErrorContains(t, err, s)
				}
				require.Empty(t, got.Actions)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.actions, got.Actions)
			require.Equal(t, tt.locations, got.Locations)

			// Applying the actions leaves a state that needs none, with
			// the same locations: recovery is idempotent, also when a
			// crash cuts it short after any action.
			for cut := 0; cut <= len(got.Actions); cut++ {
				dirs := map[string][]string{"/a": tt.a, "/b": tt.b}
				for _, act := range got.Actions[:cut] {
					dirs = applyAction(dirs, act)
				}
				again, err := RecoverMoves([]LogDirListing{{Dir: "/a", Names: dirs["/a"]}, {Dir: "/b", Names: dirs["/b"]}})
				require.NoError(t, err)
				require.Equal(t, tt.locations, again.Locations, "after %d actions", cut)
				if cut == len(got.Actions) {
					require.Empty(t, again.Actions)
				}
			}
		})
	}
}

// applyAction applies a to a model of the log directories.
func applyAction(dirs map[string][]string, a MoveAction) map[string][]string {
	out := map[string][]string{}
	for dir, names := range dirs {
		for _, name := range names {
			full := dir + "/" + name
			switch {
			case full == a.Path && a.Kind == MoveRemove:
			case full == a.Path:
				out[dir] = append(out[dir], a.To[len(dir)+1:])
			default:
				out[dir] = append(out[dir], name)
			}
		}
	}
	return out
}
