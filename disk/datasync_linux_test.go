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
