package actors_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const module = "github.com/depot-dev/depot/"

// deps lists the packages pkg imports, directly or not (go list -deps),
// tests left out.
func deps(t *testing.T, pkg string) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", module+pkg).CombinedOutput()
	require.NoError(t, err, "%s", out)
	return strings.Fields(string(out))
}

func requireNoDep(t *testing.T, pkg string, forbidden func(dep string) bool, why string) {
	t.Helper()
	for _, d := range deps(t, pkg) {
		require.False(t, forbidden(d), "%s imports %s: %s", pkg, d, why)
	}
}

// The layout's rules, as the imports show them: the pure packages import
// no actor runtime (the raft core, actors/quorum, among them: the
// controller drives it from its mailbox), the transport is a leaf, replica
// assignment imports nothing of the project, and the log dirs never import
// the partitions that send them messages.
func TestLayout(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	for _, pkg := range []string{"actors/topic", "actors/metadata", "actors/partition/state", "actors/placement", "actors/assign", "actors/replicas", "actors/quorum", "disk", "wire"} {
		requireNoDep(t, pkg, func(d string) bool { return strings.Contains(d, "protoactor") }, "a pure package")
	}
	for _, pkg := range []string{"actors/remote", "actors/topic", "actors/placement", "actors/assign", "actors/quorum"} {
		requireNoDep(t, pkg, func(d string) bool { return strings.HasPrefix(d, module+"actors") && d != module+pkg }, "a leaf: it imports no other actor package")
	}
	requireNoDep(t, "actors", func(d string) bool { return strings.HasPrefix(d, module) && d != module+"actors" }, "the runtime helpers import nothing of the project")
	requireNoDep(t, "actors/replicas", func(d string) bool { return strings.HasPrefix(d, module) && d != module+"actors/replicas" }, "pure arithmetic on what the controller passes in")
	requireNoDep(t, "actors/disks", func(d string) bool {
		return strings.HasPrefix(d, module+"actors/partition") || strings.HasPrefix(d, module+"actors/controller")
	}, "partitions and the controller import the log dirs' messages, never the reverse")
	requireNoDep(t, "actors/group", func(d string) bool {
		return strings.HasPrefix(d, module+"actors/partition") || strings.HasPrefix(d, module+"actors/controller")
	}, "groups talk to partitions and the controller by message")
}
