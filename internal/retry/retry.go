// Package retry is the bridge's one backoff policy, shared by the
// pipeline's retries of a batch and the NATS connection's reconnects:
// exponential from an initial wait, doubling, with ±50% jitter, every wait
// at most the maximum (jitter included), and never giving up. The
// bridge's retries end with their context, not with a count or a time.
package retry

import (
	"time"

	"github.com/cenkalti/backoff/v4"
)

// The policy's shape. Doubling reaches a maximum of 30s from 100ms in a
// dozen waits; ±50% jitter keeps bridges and connections that failed
// together from retrying together.
const (
	multiplier   = 2
	randomFactor = 0.5
)

// New returns the policy from initial to max: each NextBackOff is within
// ±50% of initial×2ⁿ⁻¹ and never more than max; it never returns
// backoff.Stop. Reset starts it over from initial. An initial above max
// starts at max. It is not safe for concurrent use.
func New(initial, max time.Duration) backoff.BackOff {
	return &capped{
		BackOff: backoff.NewExponentialBackOff(
			backoff.WithInitialInterval(min(initial, max)),
			backoff.WithMultiplier(multiplier),
			backoff.WithRandomizationFactor(randomFactor),
			backoff.WithMaxInterval(max),
			backoff.WithMaxElapsedTime(0),
		),
		max: max,
	}
}

// capped holds every wait to max. backoff/v4's exponential backoff caps
// its interval before it adds jitter, so on its own it waits up to 1.5
// times its MaxInterval, longer than the maximum the bridge documents.
type capped struct {
	backoff.BackOff
	max time.Duration
}

func (c *capped) NextBackOff() time.Duration {
	return min(c.BackOff.NextBackOff(), c.max)
}
