package disk_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/depot-dev/depot/disk"
	"github.com/stretchr/testify/require"
)

func TestCheckpointRoundTrip(t *testing.T) {
	offsets := map[disk.TopicPartition]int64{
		{Topic: "orders", Partition: 10}:                        7,
		{Topic: "orders", Partition: 2}:                         368769,
		{Topic: "a.b_c-d", Partition: 0}:                        0,
		{Topic: "__consumer_offsets", Partition: math.MaxInt32}: math.MaxInt64,
	}
	for _, tc := range everyFS {
		t.Run(tc.name, func(t *testing.T) {
			fsys, root := tc.open(t)
			require.NoError(t, fsys.MkdirAll(root, 0o755))
			path := filepath.Join(root, "recovery-point-offset-checkpoint")

			got, err := disk.ReadCheckpoint(fsys, path)
			require.NoError(t, err, "a missing file reads as empty")
			require.Empty(t, got)
			require.NotNil(t, got)

			require.NoError(t, disk.WriteCheckpoint(fsys, path, offsets))
			require.Equal(t, "0\n4\n"+
				"__consumer_offsets 2147483647 9223372036854775807\n"+
				"a.b_c-d 0 0\n"+
				"orders 2 368769\n"+
				"orders 10 7\n", readFileString(t, fsys, path), "sorted by topic, then partition")
			got, err = disk.ReadCheckpoint(fsys, path)
			require.NoError(t, err)
			require.Equal(t, offsets, got)

			require.NoError(t, disk.WriteCheckpoint(fsys, path, nil))
			require.Equal(t, "0\n0\n", readFileString(t, fsys, path))
			got, err = disk.ReadCheckpoint(fsys, path)
			require.NoError(t, err)
			require.Empty(t, got)

			names, err := fsys.ReadDir(root)
			require.NoError(t, err)
			require.Equal(t, []string{"recovery-point-offset-checkpoint"}, names, "no temporary file left")
		})
	}
}

func TestWriteCheckpointRejectsBadInput(t *testing.T) {
	tests := []struct {
		name    string
		offsets map[disk.TopicPartition]int64
		invalid bool
	}{
		{"empty topic", map[disk.TopicPartition]int64{{Topic: "", Partition: 0}: 1}, true},
		{"space in topic", map[disk.TopicPartition]int64{{Topic: "a b", Partition: 0}: 1}, true},
		{"newline in topic", map[disk.TopicPartition]int64{{Topic: "a\nb", Partition: 0}: 1}, true},
		{"dot topic", map[disk.TopicPartition]int64{{Topic: "..", Partition: 0}: 1}, true},
		{"long topic", map[disk.TopicPartition]int64{{Topic: strings.Repeat("a", 250), Partition: 0}: 1}, true},
		{"negative partition", map[disk.TopicPartition]int64{{Topic: "a", Partition: -1}: 1}, true},
		{"negative offset", map[disk.TopicPartition]int64{{Topic: "a", Partition: 0}: -1}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := newMemWithDir(t)
			require.NoError(t, m.WriteFile("/d/cp", []byte("0\n0\n")))
			err := disk.WriteCheckpoint(m, "/d/cp", tc.offsets)
			require.Error(t, err)
			if tc.invalid {
				require.ErrorIs(t, err, disk.ErrInvalidName)
			}
			b, err := m.ReadFile("/d/cp")
			require.NoError(t, err)
			require.Equal(t, "0\n0\n", string(b), "the old checkpoint is untouched")
			names, err := m.ReadDir("/d")
			require.NoError(t, err)
			require.Equal(t, []string{"cp"}, names)
		})
	}
	// The longest legal topic is accepted.
	m := newMemWithDir(t)
	long := map[disk.TopicPartition]int64{{Topic: strings.Repeat("a", 249), Partition: 0}: 1}
	require.NoError(t, disk.WriteCheckpoint(m, "/d/cp", long))
	got, err := disk.ReadCheckpoint(m, "/d/cp")
	require.NoError(t, err)
	require.Equal(t, long, got)
}

func TestDecodeCheckpointDamage(t *testing.T) {
	tests := []struct {
		name   string
		data   string
		offset int64
	}{
		{"empty file", "", 0},
		{"no newline after version", "0", 1},
		{"wrong version", "1\n0\n", 0},
		{"version with sign", "+0\n0\n", 0},
		{"missing count", "0\n", 2},
		{"count not a number", "0\nx\n", 2},
		{"negative count", "0\n-1\n", 2},
		{"count with leading zero", "0\n01\na 0 1\n", 2},
		{"fewer entries than count", "0\n2\na 0 1\n", 10},
		{"entry without newline", "0\n1\na 0 1", 9},
		{"more entries than count", "0\n1\na 0 1\nb 0 1\n", 10},
		{"trailing garbage", "0\n0\nx", 4},
		{"two fields", "0\n1\na 0\n", 4},
		{"four fields", "0\n1\na 0 1 2\n", 4},
		{"two spaces", "0\n1\na  0 1\n", 4},
		{"bad topic", "0\n1\na/b 0 1\n", 4},
		{"empty topic", "0\n1\n 0 1\n", 4},
		{"bad partition", "0\n1\nab x 1\n", 7},
		{"negative partition", "0\n1\nab -1 1\n", 7},
		{"partition beyond int32", "0\n1\nab 2147483648 1\n", 7},
		{"bad offset", "0\n1\nab 3 1x\n", 9},
		{"negative offset", "0\n1\nab 3 -5\n", 9},
		{"offset beyond int64", "0\n1\nab 3 9223372036854775808\n", 9},
		{"offset with leading zero", "0\n1\nab 3 05\n", 9},
		{"CRLF line", "0\r\n0\n", 0},
		{"duplicate partition", "0\n2\na 0 1\na 0 2\n", 10},
		{"huge count, no entries", "0\n9223372036854775807\n", 22},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := disk.DecodeCheckpoint([]byte(tc.data))
			var ce *disk.CorruptionError
			require.True(t, errors.As(err, &ce), "got %v", err)
			require.Equal(t, tc.offset, ce.Offset, "%v", err)

			m := newMemWithDir(t)
			require.NoError(t, m.WriteFile("/d/cp", []byte(tc.data)))
			_, err = disk.ReadCheckpoint(m, "/d/cp")
			require.ErrorAs(t, err, &ce)
			require.Equal(t, "/d/cp", ce.Path)
			require.Equal(t, tc.offset, ce.Offset)
			require.Contains(t, err.Error(), "/d/cp")
		})
	}
}

func TestWriteCheckpointIsAtomic(t *testing.T) {
	// Fail each operation of WriteCheckpoint in turn, then crash: the file
	// holds either the old or the new checkpoint, never a mix or nothing.
	old := map[disk.TopicPartition]int64{{Topic: "t", Partition: 0}: 1}
	next := map[disk.TopicPartition]int64{{Topic: "t", Partition: 0}: 2, {Topic: "t", Partition: 1}: 5}
	tried := int64(0)
	for n := int64(1); ; n++ {
		m := newMemWithDir(t)
		require.NoError(t, disk.WriteCheckpoint(m, "/d/cp", old))
		efs := disk.NewErrorFS(m)
		efs.TornWrites(rand.New(rand.NewPCG(uint64(n), 7)))
		efs.InjectAt(n)
		err := disk.WriteCheckpoint(efs, "/d/cp", next)
		done := efs.Injected() == 0
		if done {
			require.NoError(t, err)
		} else {
			require.ErrorIs(t, err, disk.ErrInjected)
		}
		m.CrashTorn(rand.New(rand.NewPCG(uint64(n), 8)))
		got, err := disk.ReadCheckpoint(m, "/d/cp")
		require.NoError(t, err, "inject at %d", n)
		if done {
			require.Equal(t, next, got)
			break
		}
		// Every failure comes before the directory sync, so the rename
		// (if it happened) is not durable.
		require.Equal(t, old, got, "inject at %d", n)
		tried = n
	}
	require.EqualValues(t, 6, tried, "open, write, sync, close, rename and directory sync each failed once")
}

func TestWriteCheckpointOnAFullFileSystem(t *testing.T) {
	old := map[disk.TopicPartition]int64{{Topic: "t", Partition: 0}: 1}
	next := map[disk.TopicPartition]int64{{Topic: "t", Partition: 0}: 2, {Topic: "t", Partition: 1}: 5}
	text, err := disk.AppendCheckpoint(nil, next)
	require.NoError(t, err)
	m := newMemWithDir(t)
	require.NoError(t, disk.WriteCheckpoint(m, "/d/cp", old))
	for k := int64(0); k < int64(len(text)); k++ {
		m.SetCapacity(m.Used() + k)
		err := disk.WriteCheckpoint(m, "/d/cp", next)
		require.ErrorIs(t, err, disk.ErrNoSpace, "room for %d bytes", k)
		require.ErrorIs(t, err, syscall.ENOSPC)
		got, err := disk.ReadCheckpoint(m, "/d/cp")
		require.NoError(t, err)
		require.Equal(t, old, got)
		names, err := m.ReadDir("/d")
		require.NoError(t, err)
		require.Equal(t, []string{"cp"}, names, "the .tmp is removed")
		require.Equal(t, k, m.Free())
	}
	m.SetCapacity(m.Used() + int64(len(text)))
	require.NoError(t, disk.WriteCheckpoint(m, "/d/cp", next))
	got, err := disk.ReadCheckpoint(m, "/d/cp")
	require.NoError(t, err)
	require.Equal(t, next, got)

	// A sync that fails with ENOSPC is a failure, not a full disk.
	efs := disk.NewErrorFS(m)
	efs.InjectError(syscall.ENOSPC)
	efs.InjectAt(3) // open, write, sync
	m.SetCapacity(-1)
	err = disk.WriteCheckpoint(efs, "/d/cp", old)
	require.ErrorIs(t, err, syscall.ENOSPC)
	require.NotErrorIs(t, err, disk.ErrNoSpace)
	require.Contains(t, err.Error(), "sync")
}

func TestPartitionDirName(t *testing.T) {
	tests := []struct {
		name string
		want disk.TopicPartition
		ok   bool
	}{
		{"orders-0", disk.TopicPartition{Topic: "orders", Partition: 0}, true},
		{"orders-17", disk.TopicPartition{Topic: "orders", Partition: 17}, true},
		{"my-topic-3", disk.TopicPartition{Topic: "my-topic", Partition: 3}, true},
		{"a--1", disk.TopicPartition{Topic: "a-", Partition: 1}, true},
		{"__consumer_offsets-49", disk.TopicPartition{Topic: "__consumer_offsets", Partition: 49}, true},
		{"t-2147483647", disk.TopicPartition{Topic: "t", Partition: math.MaxInt32}, true},
		{"orders", disk.TopicPartition{}, false},
		{"orders-", disk.TopicPartition{}, false},
		{"-3", disk.TopicPartition{}, false},
		{"orders-x", disk.TopicPartition{}, false},
		{"orders-+3", disk.TopicPartition{}, false},
		{"orders-03", disk.TopicPartition{}, false},
		{"t-2147483648", disk.TopicPartition{}, false},
		{"a b-1", disk.TopicPartition{}, false},
		{"..-1", disk.TopicPartition{}, false},
		{"orders-0.abc123-delete", disk.TopicPartition{}, false},
		{"orders-0.abc123-future", disk.TopicPartition{}, false},
		{"", disk.TopicPartition{}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := disk.ParsePartitionDirName(tc.name)
			if !tc.ok {
				require.ErrorIs(t, err, disk.ErrInvalidName)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
			require.Equal(t, tc.name, disk.PartitionDirName(got))
			require.Equal(t, tc.name, got.String())
		})
	}
}

func TestSegmentFileName(t *testing.T) {
	require.Equal(t, "00000000000000000000.log", disk.SegmentFileName(0, ".log"))
	require.Equal(t, "00000000000000368769.index", disk.SegmentFileName(368769, ".index"))
	require.Equal(t, "09223372036854775807.timeindex", disk.SegmentFileName(math.MaxInt64, ".timeindex"))

	tests := []struct {
		name string
		base int64
		ext  string
		ok   bool
	}{
		{"00000000000000000000.log", 0, ".log", true},
		{"00000000000000368769.timeindex", 368769, ".timeindex", true},
		{"00000000000000000042.log.deleted", 42, ".log.deleted", true},
		{"09223372036854775807.index", math.MaxInt64, ".index", true},
		{"09223372036854775808.index", 0, "", false},
		{"99999999999999999999.log", 0, "", false},
		{"0000000000000000000.log", 0, "", false},
		{"000000000000000000000.log", 0, "", false},
		{"0000000000000000000x.log", 0, "", false},
		{"00000000000000000000.", 0, "", false},
		{"00000000000000000000", 0, "", false},
		{"00000000000000000000log", 0, "", false},
		{"-0000000000000000001.log", 0, "", false},
		{"leader-epoch-checkpoint", 0, "", false},
		{"", 0, "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			base, ext, err := disk.ParseSegmentFileName(tc.name)
			if !tc.ok {
				require.ErrorIs(t, err, disk.ErrInvalidName)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.base, base)
			require.Equal(t, tc.ext, ext)
			require.Equal(t, tc.name, disk.SegmentFileName(base, ext))
		})
	}
}

func TestEpochCheckpointRoundTrip(t *testing.T) {
	tests := []struct {
		name    string
		entries []disk.EpochEntry
		text    string
	}{
		{"empty", []disk.EpochEntry{}, "0\n0\n"},
		{"one", []disk.EpochEntry{{Epoch: 0, StartOffset: 0}}, "0\n1\n0 0\n"},
		{"Kafka's", []disk.EpochEntry{{0, 0}, {1, 5}, {3, 10}}, "0\n3\n0 0\n1 5\n3 10\n"},
		{"an epoch without batches", []disk.EpochEntry{{2, 6}, {3, 6}}, "0\n2\n2 6\n3 6\n"},
		{"largest", []disk.EpochEntry{{math.MaxInt32, math.MaxInt64}}, "0\n1\n2147483647 9223372036854775807\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, err := disk.AppendEpochCheckpoint([]byte("x"), tc.entries)
			require.NoError(t, err)
			require.Equal(t, "x"+tc.text, string(b))
			got, err := disk.ParseEpochCheckpoint([]byte(tc.text))
			require.NoError(t, err)
			require.Equal(t, tc.entries, got)
		})
	}
}

func TestAppendEpochCheckpointRejectsBadEntries(t *testing.T) {
	for _, entries := range [][]disk.EpochEntry{
		{{-1, 0}},
		{{0, -1}},
		{{1, 0}, {1, 5}},
		{{2, 0}, {1, 5}},
		{{1, 5}, {2, 4}},
	} {
		b, err := disk.AppendEpochCheckpoint([]byte("x"), entries)
		require.ErrorIs(t, err, disk.ErrInvalidEpoch, "%v", entries)
		require.Equal(t, "x", string(b), "%v: dst unchanged", entries)
	}
}

func TestParseEpochCheckpointDamage(t *testing.T) {
	tests := []struct {
		name   string
		data   string
		offset int64
	}{
		{"empty file", "", 0},
		{"no newline after version", "0", 1},
		{"wrong version", "1\n0\n", 0},
		{"missing count", "0\n", 2},
		{"count not a number", "0\nx\n", 2},
		{"negative count", "0\n-1\n", 2},
		{"fewer entries than count", "0\n2\n0 0\n", 8},
		{"more entries than count", "0\n1\n0 0\n1 5\n", 8},
		{"entry without newline", "0\n1\n0 0", 7},
		{"trailing garbage", "0\n0\n\n", 4},
		{"one field", "0\n1\n0\n", 4},
		{"three fields", "0\n1\n0 0 0\n", 6},
		{"two spaces", "0\n1\n0  0\n", 6},
		{"tab", "0\n1\n0\t0\n", 4},
		{"negative epoch", "0\n1\n-1 0\n", 4},
		{"epoch beyond int32", "0\n1\n2147483648 0\n", 4},
		{"epoch with leading zero", "0\n1\n01 0\n", 4},
		{"negative start offset", "0\n1\n0 -1\n", 6},
		{"start offset beyond int64", "0\n1\n0 9223372036854775808\n", 6},
		{"start offset with sign", "0\n1\n0 +5\n", 6},
		{"epoch repeated", "0\n2\n1 0\n1 5\n", 8},
		{"epoch goes back", "0\n2\n2 0\n1 5\n", 8},
		{"start offset goes back", "0\n2\n1 5\n2 4\n", 8},
		{"CRLF line", "0\n1\n0 0\r\n", 6},
		{"huge count, no entries", "0\n9223372036854775807\n", 22},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := disk.ParseEpochCheckpoint([]byte(tc.data))
			var ce *disk.CorruptionError
			require.True(t, errors.As(err, &ce), "got %v", err)
			require.Equal(t, tc.offset, ce.Offset, "%v", err)
			require.Empty(t, ce.Path)
		})
	}
}
