package pipeline

import (
	"time"

	"github.com/cenkalti/backoff/v4"
)

// Retry policy: the backoff between two attempts at a batch, and between
// two attempts to make intents durable.

// capped holds every wait of a backoff, jitter included, to max. The
// exponential backoff caps its interval before adding jitter, so on its own
// it waits up to 1.5 times its MaxInterval.
type capped struct {
	backoff.BackOff
	max time.Duration
}

func (c capped) NextBackOff() time.Duration {
	next := c.BackOff.NextBackOff()
	if next != backoff.Stop && next > c.max {
		return c.max
	}
	return next
}

// defaultBackOff is the retry policy Options.NewBackOff defaults to:
// exponential from 100ms, doubling, ±50% jitter, every wait capped at
// maxInterval, never giving up.
func defaultBackOff(maxInterval time.Duration) func() backoff.BackOff {
	return func() backoff.BackOff {
		return capped{backoff.NewExponentialBackOff(
			backoff.WithInitialInterval(100*time.Millisecond),
			backoff.WithMultiplier(2),
			backoff.WithRandomizationFactor(0.5),
			backoff.WithMaxInterval(maxInterval),
			backoff.WithMaxElapsedTime(0),
		), maxInterval}
	}
}
