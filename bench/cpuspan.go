package bench

import "time"

// cpuMark is a moment of a run with the process's CPU time then.
type cpuMark struct {
	at  time.Time
	cpu time.Duration
	ok  bool
}

// markCPU reads the process's CPU time now.
func markCPU() cpuMark {
	cpu, ok := processCPU()
	return cpuMark{at: time.Now(), cpu: cpu, ok: ok}
}

// coresBetween is the CPU time the process used from a to b over the
// wall time between them: how many cores it kept busy, on average. It is
// 0 when either mark is missing or the span is empty.
func coresBetween(a, b cpuMark) float64 {
	wall := b.at.Sub(a.at)
	if !a.ok || !b.ok || wall <= 0 {
		return 0
	}
	return float64(b.cpu-a.cpu) / float64(wall)
}
