package sink

import (
	"errors"
	"fmt"
	"testing"
)

var (
	errA = errors.New("a failed")
	errB = errors.New("b failed")
)

func TestTerminal(t *testing.T) {
	if err := Terminal(nil); err != nil {
		t.Fatalf("Terminal(nil) = %v, want nil", err)
	}
	err := Terminal(errA)
	if !errors.Is(err, errA) {
		t.Errorf("Terminal(errA) does not wrap errA: %v", err)
	}
	if got, want := err.Error(), "terminal: a failed"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}

func TestIsTerminal(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"plain", errA, false},
		{"terminal", Terminal(errA), true},
		{"wrapped once", fmt.Errorf("kafka sink: %w", Terminal(errA)), true},
		{"wrapped twice", fmt.Errorf("outer: %w", fmt.Errorf("inner: %w", Terminal(errA))), true},
		{"joined with a plain error", errors.Join(errB, Terminal(errA)), true},
		{"terminal text but not the type", errors.New("terminal: a failed"), false},
		{"batch error holding a terminal", &BatchError{Errors: []error{Terminal(errA)}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := IsTerminal(tt.err); got != tt.want {
				t.Errorf("IsTerminal(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}

func TestBatchErrorMessage(t *testing.T) {
	tests := []struct {
		name string
		errs []error
		want string
	}{
		{"none failed", []error{nil, nil}, "0 of 2 messages failed"},
		{"one failed", []error{nil, errA, nil}, "1 of 3 messages failed: a failed"},
		{"first failure is quoted", []error{errB, nil, errA}, "2 of 3 messages failed: b failed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := (&BatchError{Errors: tt.errs}).Error(); got != tt.want {
				t.Errorf("Error() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestPerMessage(t *testing.T) {
	whole := errors.New("connection reset")
	tests := []struct {
		name string
		err  error
		n    int
		want []error
	}{
		{"nil error accepts every message", nil, 3, []error{nil, nil, nil}},
		{"nil error, empty batch", nil, 0, []error{}},
		{"plain error fails every message", whole, 3, []error{whole, whole, whole}},
		{"terminal error fails every message", Terminal(whole), 2, []error{Terminal(whole), Terminal(whole)}},
		{"batch error of the right length", &BatchError{Errors: []error{nil, errA, nil, errB}}, 4, []error{nil, errA, nil, errB}},
		{"wrapped batch error of the right length", fmt.Errorf("nats sink: %w", &BatchError{Errors: []error{errA, nil}}), 2, []error{errA, nil}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := PerMessage(tt.err, tt.n)
			if len(got) != tt.n {
				t.Fatalf("PerMessage returned %d errors, want %d", len(got), tt.n)
			}
			for i := range got {
				if !sameError(got[i], tt.want[i]) {
					t.Errorf("message %d: got %v, want %v", i, got[i], tt.want[i])
				}
			}
		})
	}

	// A BatchError that does not match the batch cannot say which messages
	// were accepted, so every message counts as failed with the whole
	// error.
	for _, n := range []int{1, 3} {
		t.Run(fmt.Sprintf("batch error of the wrong length for %d messages", n), func(t *testing.T) {
			be := &BatchError{Errors: []error{nil, nil}}
			got := PerMessage(be, n)
			if len(got) != n {
				t.Fatalf("PerMessage returned %d errors, want %d", len(got), n)
			}
			for i, err := range got {
				if err == nil {
					t.Errorf("message %d counted as accepted", i)
				}
				var gotBE *BatchError
				if !errors.As(err, &gotBE) || gotBE != be {
					t.Errorf("message %d: got %v, want the batch error itself", i, err)
				}
			}
		})
	}

	t.Run("result does not alias the batch error", func(t *testing.T) {
		be := &BatchError{Errors: []error{errA, nil}}
		got := PerMessage(be, 2)
		got[1] = errB
		if be.Errors[1] != nil {
			t.Errorf("writing to PerMessage's result changed the BatchError")
		}
	})
}

// sameError reports whether a and b are both nil, or are alike in
// terminal-ness and text.
func sameError(a, b error) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return IsTerminal(a) == IsTerminal(b) && a.Error() == b.Error()
}

func TestTooLarge(t *testing.T) {
	cause := errors.New("record of 2000 bytes over the limit of 1000")
	err := fmt.Errorf("kafka sink: %w", TooLarge(cause))
	if !IsTooLarge(err) || !errors.Is(err, ErrTooLarge) || !IsTerminal(err) || !errors.Is(err, cause) {
		t.Errorf("%v: IsTooLarge %v, IsTerminal %v, wraps its cause %v; want all true",
			err, IsTooLarge(err), IsTerminal(err), errors.Is(err, cause))
	}
	if want := "kafka sink: terminal: " + cause.Error(); err.Error() != want {
		t.Errorf("error text %q, want %q", err, want)
	}
	if IsTooLarge(Terminal(cause)) {
		t.Error("a terminal error of another kind reports too large")
	}
	if TooLarge(nil) != nil {
		t.Error("TooLarge(nil) is not nil")
	}
}
