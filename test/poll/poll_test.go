package poll

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// fakeTB records a Fatalf instead of ending the goroutine, so that a test
// can see Until fail.
type fakeTB struct {
	testing.TB
	failed string
}

func (f *fakeTB) Helper() {}
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.failed = format
	if len(args) > 0 {
		f.failed = args[len(args)-1].(string)
	}
	panic(f)
}

func until(timeout time.Duration, cond func() (bool, string)) (failed string) {
	f := &fakeTB{}
	defer func() {
		if r := recover(); r != nil && r != any(f) {
			panic(r)
		}
		failed = f.failed
	}()
	Until(f, timeout, cond)
	return ""
}

func TestUntilReturnsOnceTheConditionHolds(t *testing.T) {
	var n atomic.Int32
	go func() {
		for range 3 {
			n.Add(1)
		}
	}()
	if failed := until(10*time.Second, func() (bool, string) { return n.Load() == 3, "not yet" }); failed != "" {
		t.Fatalf("Until failed: %s", failed)
	}
}

func TestUntilFailsWithTheLastExplanation(t *testing.T) {
	calls := 0
	began := time.Now()
	failed := until(50*time.Millisecond, func() (bool, string) {
		calls++
		return false, "still waiting"
	})
	if failed != "still waiting" {
		t.Errorf("failure says %q, want the condition's last explanation", failed)
	}
	if took := time.Since(began); took < 50*time.Millisecond {
		t.Errorf("gave up after %s, before the 50ms timeout", took)
	}
	if calls < 3 {
		t.Errorf("condition checked %d times in 50ms, want it polled", calls)
	}
}

func TestUntilNil(t *testing.T) {
	calls := 0
	UntilNil(t, 10*time.Second, func() error {
		if calls++; calls < 3 {
			return errors.New("not yet")
		}
		return nil
	})
	f := &fakeTB{}
	func() {
		defer func() { _ = recover() }()
		UntilNil(f, 10*time.Millisecond, func() error { return errors.New("the reason") })
	}()
	if !strings.Contains(f.failed, "the reason") {
		t.Errorf("failure says %q, want the error", f.failed)
	}
}
