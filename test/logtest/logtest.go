// Package logtest gives tests a log destination they can read while the
// code under test is still writing to it from other goroutines.
package logtest

import (
	"strings"
	"sync"
)

// Buffer is an io.Writer that keeps everything written to it. Write and
// String may be called concurrently. The zero value is empty and ready.
type Buffer struct {
	mu sync.Mutex
	b  strings.Builder
}

// Write appends p; it never fails.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
