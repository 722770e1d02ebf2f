//go:build !unix

package bench

import "time"

// processCPU is unknown here: rows leave cpu_cores out.
func processCPU() (time.Duration, bool) { return 0, false }
