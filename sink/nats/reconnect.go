package nats

import (
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/kubebus/bridge/internal/retry"
)

// reconnectDelay is the wait between rounds of reconnect attempts: the
// bridge's one backoff policy (package retry) from reconnectInitialWait
// to max, started over with every outage.
//
// nats.go runs the reconnect loop itself and asks only for each wait,
// through a func(attempts int) time.Duration, so backoff.Retry cannot
// drive it: this adapter keeps the policy's state between the calls, and
// starts it over when the count of attempts does.
type reconnectDelay struct {
	max time.Duration

	mu sync.Mutex
	b  backoff.BackOff
}

// next is a nats.ReconnectDelayHandler; attempts counts the rounds of this
// outage, from 1.
func (d *reconnectDelay) next(attempts int) time.Duration {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.b == nil {
		d.b = retry.New(reconnectInitialWait, d.max)
	}
	if attempts <= 1 {
		d.b.Reset()
	}
	return d.b.NextBackOff()
}

func (d *reconnectDelay) reset() {
	d.mu.Lock()
	if d.b != nil {
		d.b.Reset()
	}
	d.mu.Unlock()
}
