package disks

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/depot-dev/depot/disk"
)

func TestEnsureDirID(t *testing.T) {
	fsys := disk.NewMemFS()
	require.NoError(t, fsys.MkdirAll("/d0", 0o755))
	id, err := EnsureDirID(fsys, "/d0", 3)
	require.NoError(t, err)
	require.True(t, validDirID(id), id)

	again, err := EnsureDirID(fsys, "/d0", 3)
	require.NoError(t, err)
	require.Equal(t, id, again, "the id is read back, not made anew")

	_, err = EnsureDirID(fsys, "/d0", 4)
	require.ErrorIs(t, err, ErrMetaProperties, "another node's directory")
	require.ErrorContains(t, err, "belongs to node 3")

	require.NoError(t, fsys.MkdirAll("/d1", 0o755))
	other, err := EnsureDirID(fsys, "/d1", 3)
	require.NoError(t, err)
	require.NotEqual(t, id, other)
}

// The id is durable once EnsureDirID returns: a crash keeps it.
func TestEnsureDirIDSurvivesACrash(t *testing.T) {
	fsys := disk.NewMemFS()
	require.NoError(t, fsys.MkdirAll("/d0", 0o755))
	require.NoError(t, fsys.SyncDir("/"))
	id, err := EnsureDirID(fsys, "/d0", 1)
	require.NoError(t, err)
	fsys.Crash()
	again, err := EnsureDirID(fsys, "/d0", 1)
	require.NoError(t, err)
	require.Equal(t, id, again)
}

func TestEnsureDirIDLeavesADamagedFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, MetaPropertiesFile)
	require.NoError(t, os.WriteFile(path, []byte("version=1\nnode.id=1\n"), 0o644))
	_, err := EnsureDirID(disk.OS, dir, 1)
	require.ErrorIs(t, err, ErrMetaProperties)
	require.ErrorContains(t, err, path)
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, "version=1\nnode.id=1\n", string(data), "left as it was")
}

func TestParseMetaProperties(t *testing.T) {
	good := "#\n# written by Kafka\nversion=1\nnode.id=7\ndirectory.id=AAAAAAAAAAAAAAAAAAAAAA\ncluster.id=abc\n"
	mp, err := ParseMetaProperties([]byte(good))
	require.NoError(t, err)
	require.Equal(t, MetaProperties{Version: 1, NodeID: 7, DirectoryID: "AAAAAAAAAAAAAAAAAAAAAA", ClusterID: "abc"}, mp)
	back, err := ParseMetaProperties(mp.Encode())
	require.NoError(t, err)
	require.Equal(t, mp, back)

	for _, tc := range []struct{ name, data string }{
		{"empty", ""},
		{"not key=value", "version=1\nnode.id=7\ndirectory.id=AAAAAAAAAAAAAAAAAAAAAA\ngarbage\n"},
		{"no directory id", "version=1\nnode.id=7\n"},
		{"short id", "version=1\nnode.id=7\ndirectory.id=AAAA\n"},
		{"id not base64url", "version=1\nnode.id=7\ndirectory.id=AAAAAAAAAAAAAAAAAAAA+/\n"},
		{"negative node", "version=1\nnode.id=-1\ndirectory.id=AAAAAAAAAAAAAAAAAAAAAA\n"},
		{"other version", "version=2\nnode.id=7\ndirectory.id=AAAAAAAAAAAAAAAAAAAAAA\n"},
		{"bad version", "version=one\nnode.id=7\ndirectory.id=AAAAAAAAAAAAAAAAAAAAAA\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseMetaProperties([]byte(tc.data))
			require.ErrorIs(t, err, ErrMetaProperties)
		})
	}
}

func FuzzParseMetaProperties(f *testing.F) {
	f.Add([]byte("version=1\nnode.id=7\ndirectory.id=AAAAAAAAAAAAAAAAAAAAAA\n"))
	f.Add([]byte("#c\n!c\n version = 1 \nnode.id=0\ndirectory.id=" + NewDirID() + "\n"))
	f.Add([]byte("=\n=="))
	f.Fuzz(func(t *testing.T, data []byte) {
		mp, err := ParseMetaProperties(data)
		if err != nil {
			require.ErrorIs(t, err, ErrMetaProperties)
			return
		}
		back, err := ParseMetaProperties(mp.Encode())
		require.NoError(t, err)
		require.Equal(t, mp, back)
	})
}

func TestSetClusterID(t *testing.T) {
	fsys := disk.NewMemFS()
	require.NoError(t, fsys.MkdirAll("/d0", 0o755))
	require.NoError(t, fsys.SyncDir("/"))
	id, err := EnsureDirID(fsys, "/d0", 1)
	require.NoError(t, err)
	require.NoError(t, SetClusterID(fsys, "/d0", 1, "cluster-a"))
	fsys.Crash()
	mp, err := EnsureMetaProperties(fsys, "/d0", 1)
	require.NoError(t, err)
	require.Equal(t, "cluster-a", mp.ClusterID, "durable")
	require.Equal(t, id, mp.DirectoryID, "the directory keeps its id")
	require.Error(t, SetClusterID(fsys, "/d0", 2, "cluster-a"), "another node's directory")
}
