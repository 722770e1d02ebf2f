//go:build race

package wire

// raceEnabled is set when the tests run under the race detector, which
// drops a share of what is put in a sync.Pool on purpose: counts of
// allocations that pools save mean nothing there.
const raceEnabled = true
