package bench

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// usageEvery is how often a usageSampler reads: twice the resolution of
// the CPU times it reads (USER_HZ, 10 ms).
const usageEvery = 20 * time.Millisecond

// usage is what the processes under watch had used by a moment: the API
// server's and the bridge's CPU time (user and system), and the bytes the
// bus had sent its clients.
type usage struct {
	at          time.Time
	api, bridge time.Duration
	busSent     int64
}

// sub is u − v.
func (u usage) sub(v usage) usage {
	return usage{at: u.at, api: u.api - v.api, bridge: u.bridge - v.bridge, busSent: u.busSent - v.busSent}
}

// usageSampler reads the usage of the API server, the bridge and the bus
// every usageEvery from its start until the benchmark ends, so that a
// window can be measured once it is known: a reconcile pass's start is
// known only from the line the bridge logs at its end.
type usageSampler struct {
	apiPID    int
	bridgePID atomic.Int64 // the running bridge's; it changes at a restart
	busSent   func() int64

	stop func() // stops the readings; called again, it does nothing

	mu      sync.Mutex
	samples []usage
}

// startUsage starts reading until stop, or the benchmark's end; busSent
// returns the bytes the bus has sent its clients so far.
func startUsage(b *testing.B, apiPID int, busSent func() int64) *usageSampler {
	b.Helper()
	u := &usageSampler{apiPID: apiPID, busSent: busSent}
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(usageEvery)
		defer t.Stop()
		for {
			u.read()
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	var once sync.Once
	u.stop = func() { once.Do(func() { close(stop); <-done }) }
	b.Cleanup(u.stop)
	return u
}

// watchBridge makes the sampler read the bridge process pid from now on.
func (u *usageSampler) watchBridge(pid int) { u.bridgePID.Store(int64(pid)) }

func (u *usageSampler) read() {
	s := usage{at: time.Now(), busSent: u.busSent()}
	s.api, _ = cpuTime(u.apiPID)
	if pid := int(u.bridgePID.Load()); pid != 0 {
		s.bridge, _ = cpuTime(pid)
	}
	u.mu.Lock()
	u.samples = append(u.samples, s)
	u.mu.Unlock()
}

// between returns what was used from the last reading at or before from
// to the first at or after to, waiting for that one if need be, and the
// window measured: those two readings' distance.
func (u *usageSampler) between(b *testing.B, from, to time.Time) (usage, time.Duration) {
	b.Helper()
	if !from.Before(to) {
		b.Fatalf("usage: empty window %s to %s", from.Format(time.StampMilli), to.Format(time.StampMilli))
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		u.mu.Lock()
		first, last := -1, -1
		for i, s := range u.samples {
			if !s.at.After(from) {
				first = i
			}
			if !s.at.Before(to) {
				last = i
				break
			}
		}
		var lo, hi usage
		if first >= 0 && last >= 0 {
			lo, hi = u.samples[first], u.samples[last]
		}
		u.mu.Unlock()
		switch {
		case first < 0:
			b.Fatalf("usage: no reading as early as %s", from.Format(time.StampMilli))
		case last >= 0:
			return hi.sub(lo), hi.at.Sub(lo.at)
		case time.Now().After(deadline):
			b.Fatalf("usage: no reading after %s", to.Format(time.StampMilli))
		}
		time.Sleep(usageEvery)
	}
}

// netCPU is the API server's CPU time over a window, less what it used
// idle over a window of the same length: idle is what it used over
// idleWindow, just before.
func netCPU(busy usage, window time.Duration, idle usage, idleWindow time.Duration) time.Duration {
	return busy.api - scaled(idle.api, idleWindow, window)
}

// scaled is d, used over from, scaled to a window of length to.
func scaled(d, from, to time.Duration) time.Duration {
	return time.Duration(float64(d) * to.Seconds() / from.Seconds())
}

// cpuTime is the CPU time, user and system, process pid has used: the
// utime and stime fields of /proc/<pid>/stat, in clock ticks of 1/100 s
// (USER_HZ, 100 on Linux).
func cpuTime(pid int) (time.Duration, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("CPU time of pid %d: %w", pid, err)
	}
	// The command name, in parentheses, may hold spaces; fields count from
	// after it, where the third field of the line (state) comes first.
	rest := string(data[strings.LastIndexByte(string(data), ')')+1:])
	fields := strings.Fields(rest)
	if len(fields) < 13 {
		return 0, fmt.Errorf("CPU time of pid %d: short /proc/%d/stat: %q", pid, pid, data)
	}
	var ticks int64
	for _, f := range fields[11:13] { // utime and stime, fields 14 and 15
		t, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("CPU time of pid %d: %w", pid, err)
		}
		ticks += t
	}
	return time.Duration(ticks) * (time.Second / 100), nil
}
