package bridge

import (
	"context"
	"errors"
	"testing"
)

// A task tells a function that ended on its own (early: the checkpoint
// writer on a damaged store) from one that ended because it was halted,
// and halt returns the function's error once it has returned.
func TestTaskEndsEarlyOrHalted(t *testing.T) {
	errDamaged := errors.New("store damaged")
	cases := []struct {
		name      string
		f         func(ctx context.Context) error
		wantEarly bool
		wantErr   error
	}{
		{name: "ends on its own", f: func(context.Context) error { return errDamaged }, wantEarly: true, wantErr: errDamaged},
		{name: "halted", f: func(ctx context.Context) error { <-ctx.Done(); return nil }},
		{name: "halted, then fails", f: func(ctx context.Context) error { <-ctx.Done(); return errDamaged }, wantErr: errDamaged},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tk := start(t.Context(), c.f)
			if c.wantEarly {
				<-tk.done
			}
			if err := tk.halt(); !errors.Is(err, c.wantErr) {
				t.Errorf("halt = %v, want %v", err, c.wantErr)
			}
			if tk.early != c.wantEarly {
				t.Errorf("early = %v, want %v", tk.early, c.wantEarly)
			}
		})
	}
}
