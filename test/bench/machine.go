package bench

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// Machine describes where the figures were measured.
type Machine struct {
	CPUs      int
	CPUModel  string
	MemoryGiB float64
	GoVersion string
	OS, Arch  string
}

// ThisMachine reads the machine's description; fields it cannot read stay
// empty.
func ThisMachine() Machine {
	m := Machine{CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH}
	m.CPUModel = procField("/proc/cpuinfo", "model name")
	if kb, err := strconv.ParseFloat(strings.Fields(procField("/proc/meminfo", "MemTotal") + " 0")[0], 64); err == nil {
		m.MemoryGiB = kb / (1 << 20)
	}
	return m
}

// procField returns the value of the first "key: value" line of a /proc file.
func procField(path, key string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// LoadAverage is the machine's 1-minute load average, from /proc/loadavg.
func LoadAverage() (float64, error) {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0, err
	}
	return parseLoadAverage(string(b))
}

func parseLoadAverage(s string) (float64, error) {
	fields := strings.Fields(s)
	if len(fields) == 0 {
		return 0, fmt.Errorf("load average: empty")
	}
	v, err := strconv.ParseFloat(fields[0], 64)
	if err != nil {
		return 0, fmt.Errorf("load average: %w", err)
	}
	return v, nil
}

// Quietness is what a wait for a quiet machine found.
type Quietness struct {
	// Load is the 1-minute load average when the wait ended, or -1 when
	// it could not be read.
	Load float64
	// Waited is how long the wait took.
	Waited time.Duration
	// Quiet reports whether the load stayed under the limit for the
	// readings asked for; false when the bound passed first or the load
	// could not be read.
	Quiet bool
}

// QuietPolicy says when the machine is quiet enough to measure on: Readings
// consecutive readings of the 1-minute load average, Every apart, each
// under Limit; waited for at most Bound.
type QuietPolicy struct {
	Limit    float64
	Readings int
	Every    time.Duration
	Bound    time.Duration
}

// WaitQuiet waits until the machine is quiet as p says, or p.Bound passed,
// or ctx ended, reading the load with read (LoadAverage when nil).
func (p QuietPolicy) WaitQuiet(ctx context.Context, read func() (float64, error)) Quietness {
	if read == nil {
		read = LoadAverage
	}
	start := time.Now()
	quiet := 0
	for {
		load, err := read()
		if err != nil {
			return Quietness{Load: -1, Waited: time.Since(start)}
		}
		if load < p.Limit {
			quiet++
		} else {
			quiet = 0
		}
		waited := time.Since(start)
		if quiet >= p.Readings {
			return Quietness{Load: load, Waited: waited, Quiet: true}
		}
		if waited+p.Every > p.Bound {
			return Quietness{Load: load, Waited: waited}
		}
		select {
		case <-ctx.Done():
			return Quietness{Load: load, Waited: waited}
		case <-time.After(p.Every):
		}
	}
}
