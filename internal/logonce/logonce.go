// Package logonce bounds a log of things that may repeat without end (a
// forged record read again at each reconnect, say): each key is logged
// once, and at most a fixed number of keys are remembered, so that
// neither the log nor the memory grows with the repeats.
package logonce

import "sync"

// Keys tells whether a key is new. The zero value remembers no key and
// says every key is old; make one with New. It is safe for concurrent
// use.
type Keys struct {
	mu   sync.Mutex
	seen map[string]struct{}
	max  int
}

// New returns Keys that remember up to max keys; past them, every key
// not remembered is old.
func New(max int) *Keys {
	return &Keys{seen: map[string]struct{}{}, max: max}
}

// First is true the first time it is given key, while fewer than max
// keys are remembered.
func (k *Keys) First(key string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, ok := k.seen[key]; ok || len(k.seen) >= k.max {
		return false
	}
	k.seen[key] = struct{}{}
	return true
}
