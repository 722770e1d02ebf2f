package disk

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/depot-dev/depot/wire"
)

const epochCheckpointOfP = "/p/" + LeaderEpochCheckpointFile

// appendOfEpoch appends a batch of 5 records of epoch at the end of l, as
// a leader (AppendValidated, the partition's path) or as a follower.
func appendOfEpoch(t testing.TB, l *Log, epoch int32, asFollower bool) {
	t.Helper()
	b := leaderBatch(t, 5, epoch, l.EndOffset())
	h, err := wire.Validate(b)
	require.NoError(t, err)
	if asFollower {
		_, err = l.AppendAsFollower(b, h)
	} else {
		_, err = l.AppendValidated(b, h)
	}
	require.NoError(t, err)
}

// TestRecoveryAssignsEpochsOfBatchesPastTheCheckpoint opens a log whose
// checkpoint lost the epochs of its last batches, as an OS crash leaves
// it when writeback wrote the batches and not the checkpoint: the
// batches past the recovery point whose epochs are above the checkpoint's
// latest are kept, and their epochs assigned, up to the partition's epoch
// given to Open, and the cache is written back durably; those above it
// are taken for damage and cut, as before.
func TestRecoveryAssignsEpochsOfBatchesPastTheCheckpoint(t *testing.T) {
	for _, tt := range []struct {
		leaderEpoch int32
		end         int64
		want        []EpochEntry
	}{
		{5, 25, epochs(0, 0, 3, 10, 4, 20)},
		{4, 25, epochs(0, 0, 3, 10, 4, 20)},
		{3, 20, epochs(0, 0, 3, 10)},
		{2, 10, epochs(0, 0)},
		{NoLeaderEpoch, 10, epochs(0, 0)},
	} {
		for _, recoveryPoint := range []int64{10, 5, 0} {
			t.Run(fmt.Sprintf("partition epoch %d/recovery point %d", tt.leaderEpoch, recoveryPoint), func(t *testing.T) {
				mem := NewMemFS()
				opts := testOptions(newClock(), func(c *Config) { c.SegmentBytes = 600 })
				l := openLog(t, mem, "/p", opts)
				for _, epoch := range []int32{0, 0, 3, 3, 4} {
					appendOfEpoch(t, l, epoch, true)
				}
				require.Greater(t, len(l.Segments()), 1, "the batches span segments")
				require.NoError(t, l.Close())
				// The checkpoint as the first flush left it.
				require.NoError(t, mem.WriteFile(epochCheckpointOfP, mustEpochText(t, epochs(0, 0))))

				o := opts
				o.RecoveryPoint = recoveryPoint
				o.LeaderEpoch = tt.leaderEpoch
				l = openLog(t, mem, "/p", o)
				require.Equal(t, tt.end, l.EndOffset())
				require.Equal(t, tt.want, l.Epochs())
				requireEpochsMatchBatches(t, l, "recovered")
				requireReadable(t, l)

				mem.Crash()
				got, err := ReadFile(mem, epochCheckpointOfP)
				require.NoError(t, err)
				require.Equal(t, mustEpochText(t, tt.want), got, "written back durably")
				o.RecoveryPoint = tt.end
				o.LeaderEpoch = NoLeaderEpoch
				l = openLog(t, mem, "/p", o)
				require.Equal(t, tt.end, l.EndOffset(), "no partition epoch is needed any more")
				require.Equal(t, tt.want, l.Epochs())
				require.NoError(t, l.Close())
			})
		}
	}
}
