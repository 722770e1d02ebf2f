// Package placement chooses where partition replicas live: which log
// directory of a node holds each new partition. It is pure: no I/O, no
// actors, no clocks; callers pass in what they know of the directories and
// act on the answer.
//
// Policies share one shape, Policy: given the directories in their configured
// order and a number of new partitions of one topic, return one directory
// path per partition. ByCount is Kafka's policy.
package placement

import (
	"errors"
	"fmt"
)

// Sentinel errors of the package, wrapped with %w.
var (
	// ErrNoOnlineDirs is returned when no directory is online to take a partition.
	ErrNoOnlineDirs = errors.New("placement: no online log directory")
	// ErrInvalidCount is returned for a negative number of partitions.
	ErrInvalidCount = errors.New("placement: invalid partition count")
)

// Dir is what placement knows of one log directory.
type Dir struct {
	// Path names the directory; it is what a policy returns.
	Path string
	// Partitions is the number of partition replicas it holds now.
	Partitions int
	// Bytes is the size of the partitions it holds.
	Bytes int64
	// Online is false once the directory failed; it then takes nothing.
	Online bool
}

// Policy chooses a directory for each of n new partitions of one topic. The
// result has n paths, the i-th for the i-th partition. dirs is not modified.
type Policy func(dirs []Dir, n int) ([]string, error)

var _ Policy = ByCount

// ByCount is Kafka's placement (LogManager.nextLogDirs): each partition goes
// to the online directory holding the fewest partitions, ties broken by
// directory order, and each choice counts toward the next, so n partitions
// of a new topic spread evenly. Offline directories are skipped. It returns
// ErrNoOnlineDirs when none is online (and n > 0), ErrInvalidCount when n < 0.
func ByCount(dirs []Dir, n int) ([]string, error) {
	if n < 0 {
		return nil, fmt.Errorf("%w: %d", ErrInvalidCount, n)
	}
	if n == 0 {
		return []string{}, nil
	}
	counts := make([]int, len(dirs))
	online := 0
	for i, d := range dirs {
		counts[i] = d.Partitions
		if d.Online {
			online++
		}
	}
	if online == 0 {
		return nil, fmt.Errorf("%w (%d configured)", ErrNoOnlineDirs, len(dirs))
	}
	chosen := make([]string, 0, n)
	for range n {
		best := -1
		for i, d := range dirs {
			if d.Online && (best < 0 || counts[i] < counts[best]) {
				best = i
			}
		}
		counts[best]++
		chosen = append(chosen, dirs[best].Path)
	}
	return chosen, nil
}
