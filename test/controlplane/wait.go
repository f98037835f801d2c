package controlplane

import (
	"context"
	"errors"
	"fmt"
	"time"
)

const pollInterval = 100 * time.Millisecond

// errExited means the process ended while we waited for it to serve.
var errExited = errors.New("process exited during start-up")

// waitServing calls check every pollInterval until it succeeds, the process
// exits (errExited) or ctx ends (ctx.Err()). The last check error is
// included in the returned error.
func waitServing(ctx context.Context, p *process, check func(context.Context) error) error {
	began := time.Now()
	t := time.NewTicker(pollInterval)
	defer t.Stop()
	for {
		err := check(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-p.done:
			return fmt.Errorf("%w: %w", errExited, p.exitError())
		case <-ctx.Done():
			return fmt.Errorf("gave up after %s: %w (last check: %v)", time.Since(began).Round(time.Millisecond), ctx.Err(), err)
		case <-t.C:
		}
	}
}

// startWithRetry runs start up to startAttempts times while a process exits
// during start-up complaining that its port is taken (retry asks start to
// pick new ports, or to wait for a fixed port to be released).
func startWithRetry(ctx context.Context, l *processLog, start func(ctx context.Context) (*process, error)) (*process, error) {
	var err error
	for attempt := 1; attempt <= startAttempts; attempt++ {
		var p *process
		p, err = start(ctx)
		if err == nil {
			return p, nil
		}
		if !errors.Is(err, errExited) || !l.tail.contains(addrInUse) || ctx.Err() != nil {
			break
		}
		// Let whoever holds the port move on before the next attempt.
		t := time.NewTimer(time.Duration(attempt) * 500 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, err
		case <-t.C:
		}
	}
	return nil, err
}
