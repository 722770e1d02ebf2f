package bench

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
)

// peakRSS is the process's peak resident set in bytes, from VmHWM in
// /proc/self/status; 0 where that file does not exist.
func peakRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	n, err := parseVmHWM(b)
	if err != nil {
		return 0
	}
	return n
}

// parseVmHWM finds "VmHWM:  <n> kB" in a /proc/PID/status text and returns
// n*1024.
func parseVmHWM(status []byte) (int64, error) {
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, "VmHWM:")
		if !ok {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) != 2 || fields[1] != "kB" {
			return 0, fmt.Errorf("bench: VmHWM line %q", line)
		}
		kb, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil || kb < 0 || kb > math.MaxInt64/1024 {
			return 0, fmt.Errorf("bench: VmHWM line %q", line)
		}
		return kb * 1024, nil
	}
	return 0, fmt.Errorf("bench: no VmHWM line")
}
