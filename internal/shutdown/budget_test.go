package shutdown

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

// Every stage ends at its share of the budget, counted from the moment
// the context that Watch follows ended, in order, and the last before
// the budget's end.
func TestBudgetDeadlines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, stop := context.WithCancel(t.Context())
		b := Watch(ctx, 20*time.Second)
		time.Sleep(3 * time.Second) // running: no stop yet
		stop()
		synctest.Wait()
		stopped := time.Now()
		time.Sleep(time.Second) // the stages are counted from the stop, not from when they are asked for
		if got := b.Began(); !got.Equal(stopped) {
			t.Fatalf("Began = %v, want the moment ctx ended, %v", got, stopped)
		}
		want := map[Stage]time.Duration{Drain: 15 * time.Second, Flush: 18 * time.Second, Exit: 19 * time.Second}
		prev := stopped
		for _, s := range []Stage{Drain, Flush, Exit} {
			d := b.Deadline(s)
			if got := d.Sub(stopped); got != want[s] {
				t.Errorf("%s ends %s after the stop, want %s", s, got, want[s])
			}
			if !d.After(prev) {
				t.Errorf("%s ends at %v, not after the stage before it (%v)", s, d, prev)
			}
			prev = d
		}
		if end := stopped.Add(b.Total()); !prev.Before(end) {
			t.Errorf("the exit ends at %v, not before the budget's end %v", prev, end)
		}
	})
}

// A stop that does not come from the context (Begin) begins the budget;
// the context's end later does not move it.
func TestBudgetBeginsOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, stop := context.WithCancel(t.Context())
		b := Watch(ctx, 10*time.Second)
		b.Begin()
		began := time.Now()
		time.Sleep(2 * time.Second)
		stop()
		synctest.Wait()
		if got := b.Began(); !got.Equal(began) {
			t.Errorf("Began = %v, want the first Begin, %v", got, began)
		}
	})
}

type key struct{}

// A stage's context outlives its parent, keeps its values, and ends at
// the stage's deadline.
func TestBudgetContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		parent, stop := context.WithCancel(context.WithValue(t.Context(), key{}, "v"))
		b := Watch(parent, 10*time.Second)
		stop()
		synctest.Wait()
		ctx, cancel := b.Context(parent, Flush)
		defer cancel()
		if ctx.Err() != nil {
			t.Fatalf("the flush's context ended with its parent: %v", ctx.Err())
		}
		if ctx.Value(key{}) != "v" {
			t.Errorf("the flush's context lost its parent's values")
		}
		if d, ok := ctx.Deadline(); !ok || !d.Equal(b.Deadline(Flush)) {
			t.Errorf("deadline %v, %v; want the flush's, %v", d, ok, b.Deadline(Flush))
		}
		<-ctx.Done()
		if got, want := time.Since(b.Began()), 9*time.Second; got != want {
			t.Errorf("the flush's context ended %s after the stop, want %s", got, want)
		}
	})
}

// Wait ends when what it waits for does, or at the stage's deadline,
// whichever comes first.
func TestBudgetWait(t *testing.T) {
	for _, c := range []struct {
		name string
		work time.Duration // how long what it waits for takes
		want time.Duration // how long after the stop Wait returns
	}{
		{"done early", time.Second, time.Second},
		{"given up at the exit's deadline", time.Hour, 19 * time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, stop := context.WithCancel(t.Context())
				b := Watch(ctx, 20*time.Second)
				stop()
				synctest.Wait()
				release := make(chan struct{})
				defer close(release)
				b.Wait(Exit, func() {
					select {
					case <-time.After(c.work):
					case <-release:
					}
				})
				if got := time.Since(b.Began()); got != c.want {
					t.Errorf("Wait returned %s after the stop, want %s", got, c.want)
				}
			})
		})
	}
}
