//go:build !race

package remote

// raceEnabled: see race_test.go.
const raceEnabled = false
