package source

import (
	"context"
	"testing"
	"time"
)

// runner is what Source and Set have in common: a Run that blocks until
// its context ends, and a channel closed once the initial lists are in.
type runner interface {
	Run(ctx context.Context) error
	Synced() <-chan struct{}
}

// startSynced starts r.Run(ctx) and waits until r is synced. It fails the
// test, after stopping r with stop, when Run returns first or when r is
// not synced within timeout; why says what that would mean. It returns
// the channel Run's error arrives on.
func startSynced(t *testing.T, ctx context.Context, stop func(), r runner, timeout time.Duration, why string) <-chan error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	select {
	case <-r.Synced():
	case err := <-done:
		t.Fatalf("Run returned %v before it synced", err)
	case <-time.After(timeout):
		stop()
		<-done
		t.Fatalf("not synced within %s: %s", timeout, why)
	}
	return done
}
