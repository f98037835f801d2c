package main

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kubebus/bridge/internal/shutdown"
)

// A run that does not end once the stop began is left behind at the
// budget's exit deadline, with an error: the process exits inside its
// grace period, and not with 0.
func TestUntilExitGivesUpAtTheExitDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, stop := context.WithCancel(t.Context())
		budget := shutdown.Watch(ctx, 20*time.Second)
		hang := make(chan struct{})
		defer close(hang)
		began := time.Now()
		stop()
		err := untilExit(ctx, budget, func() error { <-hang; return nil })
		if !errors.Is(err, errStopOverrun) {
			t.Fatalf("untilExit = %v, want errStopOverrun", err)
		}
		if took := time.Since(began); took > budget.Total() || took < budget.Total()/2 {
			t.Errorf("gave up after %s of a %s budget", took, budget.Total())
		}
		if code := exitCode(slog.New(slog.DiscardHandler), err); code == 0 {
			t.Errorf("exit code 0 for a stop that did not end")
		}
	})
}

// A run that ends within the budget gives its own error.
func TestUntilExitReturnsTheRunsError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, stop := context.WithCancel(t.Context())
		budget := shutdown.Watch(ctx, 20*time.Second)
		want := errors.New("run's own")
		stop()
		if err := untilExit(ctx, budget, func() error { time.Sleep(time.Second); return want }); err != want {
			t.Errorf("untilExit = %v, want %v", err, want)
		}
		if err := untilExit(t.Context(), shutdown.Watch(t.Context(), time.Second), func() error { return nil }); err != nil {
			t.Errorf("untilExit of a run that ends before any stop = %v", err)
		}
	})
}
