package pipeline

import (
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/kubebus/bridge/internal/retry"
)

// Retry policy: the backoff between two attempts at a batch, and between
// two attempts to make intents durable.

// firstRetry is the first wait after a failed attempt: short enough that a
// blip costs little, and doubled from there.
const firstRetry = 100 * time.Millisecond

// defaultBackOff is the retry policy Options.NewBackOff defaults to: the
// bridge's one policy (package retry) from firstRetry to maxInterval,
// never giving up.
func defaultBackOff(maxInterval time.Duration) func() backoff.BackOff {
	return func() backoff.BackOff { return retry.New(firstRetry, maxInterval) }
}
