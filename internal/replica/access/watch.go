package access

import (
	"context"
	"crypto/sha256"
	"os"
	"time"
)

// DefaultInterval is how often a file is read again to see if it
// changed. A mounted Secret changes by a symlink swap, which the kubelet
// makes a minute or more after the Secret changes; five seconds adds little
// to that, and reading a small file that often costs next to nothing.
const DefaultInterval = 5 * time.Second

// polledFile is a file read again on each tick, to tell when its content
// changed. Polling the content, rather than watching for events, sees a
// symlink swap, an in-place write and a replaced file alike.
type polledFile struct {
	path string
	sum  [sha256.Size]byte
}

// read returns the file's content and whether it differs from what the
// last call to seen recorded.
func (p *polledFile) read() ([]byte, bool, error) {
	data, err := os.ReadFile(p.path)
	if err != nil {
		return nil, false, err
	}
	return data, sha256.Sum256(data) != p.sum, nil
}

// seen records data as the content last dealt with, good or bad, so that a
// bad file is reported once, not on every tick.
func (p *polledFile) seen(data []byte) { p.sum = sha256.Sum256(data) }

// every calls f every interval until ctx ends, then returns nil.
func every(ctx context.Context, interval time.Duration, f func()) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			f()
		}
	}
}

func intervalOrDefault(d time.Duration) time.Duration {
	if d <= 0 {
		return DefaultInterval
	}
	return d
}
