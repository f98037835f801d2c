package main

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kubebus/bridge/internal/shutdown"
)

// The last waits of a stop (the HTTP server's shutdown) end when what
// they wait for does, or at the exit's deadline of the shutdown budget,
// whichever comes first.
func TestWaitWithin(t *testing.T) {
	for _, c := range []struct {
		name string
		work time.Duration // how long wait takes
		want time.Duration // how long after the stop waitWithin returns
	}{
		{"done early", time.Second, time.Second},
		{"given up at the exit's deadline", time.Hour, 19 * time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, stop := context.WithCancel(t.Context())
				budget := shutdown.Watch(ctx, 20*time.Second)
				stop()
				synctest.Wait()
				release := make(chan struct{})
				defer close(release)
				waitWithin(budget, func() {
					select {
					case <-time.After(c.work):
					case <-release:
					}
				})
				if got := time.Since(budget.Began()); got != c.want {
					t.Errorf("waitWithin returned %s after the stop, want %s", got, c.want)
				}
			})
		})
	}
}
