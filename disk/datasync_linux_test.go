package disk

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestOSFileSyncsData(t *testing.T) {
	f, err := OS.OpenFile(filepath.Join(t.TempDir(), "00000000000000000000.log"), os.O_CREATE|os.O_RDWR, 0o644)
	require.NoError(t, err)
	defer f.Close()
	_, err = f.Write(make([]byte, 64<<10))
	require.NoError(t, err)
	d, ok := f.(dataSyncer)
	require.True(t, ok, "OS files sync their data alone on Linux")
	require.NoError(t, d.SyncData())
	require.NoError(t, syncData(f))
	require.NoError(t, f.Close())
	require.Error(t, d.SyncData(), "a closed file")
	require.Error(t, syncData(f), "a closed file")
}

// TestOSFileSyncsItsFileSystem: OS files sync their file system at once
// where the kernel reports its errors, and check their own writeback.
func TestOSFileSyncsItsFileSystem(t *testing.T) {
	f, err := OS.OpenFile(filepath.Join(t.TempDir(), "00000000000000000000.log"), os.O_CREATE|os.O_RDWR, 0o644)
	require.NoError(t, err)
	defer f.Close()
	_, err = f.Write(make([]byte, 64<<10))
	require.NoError(t, err)
	if syncfsReportsErrors() {
		require.NoError(t, syncFileSystem(f))
	} else {
		require.ErrorIs(t, syncFileSystem(f), errNoFileSystemSync)
	}
	require.NoError(t, checkWriteback(f))
	require.NoError(t, f.Close())
	require.Error(t, checkWriteback(f), "a closed file")
}

func TestKernelAtLeast(t *testing.T) {
	for _, tc := range []struct {
		release string
		want    bool
	}{
		{"5.8.0", true},
		{"5.7.19-generic", false},
		{"5.10.0-18-amd64", true},
		{"6.18.44-fc-v1252", true},
		{"4.19.0", false},
		{"5.8-rc1", true},
		{"5", false},
		{"", false},
		{"x.y", false},
	} {
		require.Equal(t, tc.want, kernelAtLeast(tc.release, 5, 8), tc.release)
	}
}
