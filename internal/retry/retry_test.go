package retry

import (
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
)

// TestPolicy: every wait is within ±50% of the doubling interval, never
// above the maximum, and the policy never gives up, however long it runs;
// Reset starts it over.
func TestPolicy(t *testing.T) {
	for _, tc := range []struct {
		name         string
		initial, max time.Duration
	}{
		{"pipeline's", 100 * time.Millisecond, 30 * time.Second},
		{"NATS reconnects'", 250 * time.Millisecond, 2 * time.Second},
		{"initial above the maximum", time.Second, 300 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := New(tc.initial, tc.max)
			for round := range 2 {
				interval := min(tc.initial, tc.max)
				for i := range 200 {
					got := b.NextBackOff()
					if got == backoff.Stop {
						t.Fatalf("round %d, wait %d: Stop", round, i)
					}
					lo, hi := interval/2, min(interval*3/2+time.Nanosecond, tc.max)
					if got < lo || got > hi {
						t.Fatalf("round %d, wait %d = %v, want in [%v, %v]", round, i, got, lo, hi)
					}
					interval = min(2*interval, tc.max)
				}
				b.Reset()
			}
		})
	}
}
