package remote

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// addSeedFiles seeds a fuzz target with the raw files in
// testdata/seeds/<name>, when there are any.
func addSeedFiles(f *testing.F, name string, add func([]byte)) {
	f.Helper()
	paths, _ := filepath.Glob(filepath.Join("testdata", "seeds", name, "*"))
	for _, p := range paths {
		b, err := os.ReadFile(p)
		require.NoError(f, err)
		add(b)
	}
}
