// Package poll waits in tests for a condition that something running
// concurrently makes true, by polling it, never by sleeping a guessed
// time.
//
// Until checks the condition at once, then at intervals that start at a
// millisecond and grow to 20 ms, so that a short wait costs little and a
// long one does not spin. It returns as soon as the condition holds and
// fails the test, with what the condition last said, once the timeout has
// passed; it is called from the test's own goroutine.
package poll

import (
	"testing"
	"time"
)

// maxInterval is the longest pause between two checks: short beside any
// timeout a test gives, long enough not to busy the machine.
const maxInterval = 20 * time.Millisecond

// Until polls cond until it returns true, failing the test with cond's
// last explanation after timeout.
func Until(t testing.TB, timeout time.Duration, cond func() (ok bool, why string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	pause := time.Millisecond
	for {
		ok, why := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("condition not met after %s: %s", timeout, why)
		}
		time.Sleep(pause)
		pause = min(2*pause, maxInterval)
	}
}

// UntilNil is Until for a condition that holds when it returns nil, and
// otherwise says why not with its error.
func UntilNil(t testing.TB, timeout time.Duration, cond func() error) {
	t.Helper()
	Until(t, timeout, func() (bool, string) {
		if err := cond(); err != nil {
			return false, err.Error()
		}
		return true, ""
	})
}
