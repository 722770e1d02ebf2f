package node

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/depot-dev/depot/actors/group"
)

func TestDefaultConfigIsWhatStartFillsIn(t *testing.T) {
	d := DefaultConfig()
	require.NoError(t, d.withDefaults().validate())
	require.Empty(t, d.LogDirs, "log dirs follow the data dir")
	require.Equal(t, DefaultHTTP, d.HTTP)
	require.Equal(t, DefaultKafkaListen, d.KafkaListen)

	filled := d.withDefaults()
	require.Equal(t, []LogDir{{Path: filepath.Join(DefaultDataDir, "logs-0")}, {Path: filepath.Join(DefaultDataDir, "logs-1")}}, filled.LogDirs)
	filled.LogDirs = nil
	require.Equal(t, d, filled, "Start changes nothing else in the defaults")

	require.Equal(t, group.DefaultInitialRebalanceDelay, d.GroupInitialRebalanceDelay)
	unset := Config{HTTP: DefaultHTTP, KafkaListen: DefaultKafkaListen, GroupInitialRebalanceDelay: d.GroupInitialRebalanceDelay, Balance: d.Balance}.withDefaults()
	unset.LogDirs = nil
	require.Equal(t, d, unset)
}

func TestFormatBytesReadsBack(t *testing.T) {
	for _, tc := range []struct {
		n    int64
		want string
	}{
		{0, "0"},
		{1, "1"},
		{1000, "1000"},
		{1024, "1KiB"},
		{1536 << 10, "1536KiB"},
		{64 << 20, "64MiB"},
		{3 << 30, "3GiB"},
		{5 << 40, "5TiB"},
		{2048 << 40, "2048TiB"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			require.Equal(t, tc.want, formatBytes(tc.n))
			n, err := ParseBytes(tc.want)
			require.NoError(t, err)
			require.Equal(t, tc.n, n)
		})
	}
}

// The file cache's bound defaults to the process's open-file limit less
// 4096, or half of it when that is less, and one past the limit, or below
// 1, is refused.
func TestMaxOpenFiles(t *testing.T) {
	var rl unix.Rlimit
	require.NoError(t, unix.Getrlimit(unix.RLIMIT_NOFILE, &rl))
	require.Equal(t, int(min(rl.Cur-min(rl.Cur/2, 4096), 1<<20)), DefaultMaxOpenFiles())
	require.Equal(t, DefaultMaxOpenFiles(), DefaultConfig().MaxOpenFiles)
	for _, tc := range []struct {
		maxOpenFiles int
		ok           bool
	}{
		{1, true},
		{200, true},
		{int(rl.Cur), true},
		{int(rl.Cur) + 1, false},
		{-1, false},
	} {
		cfg := Config{MaxOpenFiles: tc.maxOpenFiles}.withDefaults()
		err := cfg.validate()
		if tc.ok {
			require.NoError(t, err, "%d", tc.maxOpenFiles)
		} else {
			require.ErrorContains(t, err, "max open files", "%d", tc.maxOpenFiles)
		}
	}
}

// A negative replica fetch linger is refused; none answers at once.
func TestReplicaFetchLinger(t *testing.T) {
	require.Zero(t, DefaultConfig().ReplicaFetchLinger)
	require.NoError(t, Config{ReplicaFetchLinger: 2 * time.Millisecond}.withDefaults().validate())
	require.ErrorContains(t, Config{ReplicaFetchLinger: -time.Millisecond}.withDefaults().validate(), "replica fetch linger")
}
