package disk

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestOSFileStartsWriteback(t *testing.T) {
	f, err := OS.OpenFile(filepath.Join(t.TempDir(), "00000000000000000000.log"), os.O_CREATE|os.O_RDWR, 0o644)
	require.NoError(t, err)
	defer f.Close()
	_, err = f.Write(make([]byte, 2<<20))
	require.NoError(t, err)
	w, ok := f.(writebacker)
	require.True(t, ok, "OS files start writeback on Linux")
	require.NoError(t, w.StartWriteback(0, 2<<20))
	require.NoError(t, f.Close())
	require.Error(t, w.StartWriteback(0, 1), "a closed file")
}
