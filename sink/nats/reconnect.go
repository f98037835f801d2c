package nats

import (
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"
)

// reconnectDelay is the wait between rounds of reconnect attempts: an
// exponential backoff from reconnectInitialWait to max, with jitter, that
// starts over with every outage.
type reconnectDelay struct {
	max time.Duration

	mu sync.Mutex
	b  *backoff.ExponentialBackOff
}

// next is a nats.ReconnectDelayHandler; attempts counts the rounds of this
// outage, from 1.
func (d *reconnectDelay) next(attempts int) time.Duration {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.b == nil || attempts <= 1 {
		d.b = backoff.NewExponentialBackOff(
			backoff.WithInitialInterval(min(reconnectInitialWait, d.max)),
			backoff.WithMultiplier(2),
			backoff.WithRandomizationFactor(0.5),
			backoff.WithMaxInterval(d.max),
			backoff.WithMaxElapsedTime(0),
		)
	}
	// The jitter is added after the cap; keep the cap.
	return min(d.b.NextBackOff(), d.max)
}

func (d *reconnectDelay) reset() {
	d.mu.Lock()
	d.b = nil
	d.mu.Unlock()
}
