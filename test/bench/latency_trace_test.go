package bench

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"golang.org/x/exp/trace"
)

// latencyTraceStats is what an execution trace tells of a process's own
// scheduling: how long its goroutines waited, runnable, for the Go
// scheduler to run them, and how long its stop-the-world pauses took. A
// thread that the operating system took off its CPU while it ran a
// goroutine is not seen: that goroutine counts as running.
type latencyTraceStats struct {
	// runnable is, for every time a goroutine became runnable, how long it
	// waited to run, sorted.
	runnable []time.Duration
	// stw are the stop-the-world pauses, sorted.
	stw []time.Duration
}

// latencyReadTrace reads the execution trace in file.
func latencyReadTrace(file string) (latencyTraceStats, error) {
	var st latencyTraceStats
	f, err := os.Open(file)
	if err != nil {
		return st, err
	}
	defer f.Close()
	r, err := trace.NewReader(f)
	if err != nil {
		return st, err
	}
	became := map[trace.GoID]trace.Time{} // goroutines runnable, since when
	stopped := map[string]trace.Time{}    // stop-the-world ranges begun
	for {
		ev, err := r.ReadEvent()
		if err == io.EOF {
			break
		}
		if err != nil {
			return st, err
		}
		switch ev.Kind() {
		case trace.EventStateTransition:
			t := ev.StateTransition()
			if t.Resource.Kind != trace.ResourceGoroutine {
				continue
			}
			id := t.Resource.Goroutine()
			from, to := t.Goroutine()
			switch {
			case to == trace.GoRunnable:
				became[id] = ev.Time()
			case from == trace.GoRunnable && to == trace.GoRunning:
				if at, ok := became[id]; ok {
					st.runnable = append(st.runnable, ev.Time().Sub(at))
					delete(became, id)
				}
			}
		case trace.EventRangeBegin, trace.EventRangeEnd:
			name := ev.Range().Name
			if !strings.HasPrefix(name, "stop-the-world") {
				continue
			}
			if ev.Kind() == trace.EventRangeBegin {
				stopped[name] = ev.Time()
			} else if at, ok := stopped[name]; ok {
				st.stw = append(st.stw, ev.Time().Sub(at))
				delete(stopped, name)
			}
		}
	}
	slices.Sort(st.runnable)
	slices.Sort(st.stw)
	return st, nil
}

func (s latencyTraceStats) String() string {
	ms := func(ds []time.Duration, q float64) float64 { return latencyMillis(latencyPercentile(ds, q)) }
	return fmt.Sprintf("goroutines waited to run, once runnable, p50 %.3f ms, p99 %.3f ms, p99.9 %.3f ms, max %.3f ms (%d times); %d stop-the-world pauses, max %.3f ms",
		ms(s.runnable, 0.5), ms(s.runnable, 0.99), ms(s.runnable, 0.999), ms(s.runnable, 1), len(s.runnable), len(s.stw), ms(s.stw, 1))
}
