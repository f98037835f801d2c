package sink

import (
	"errors"
	"fmt"
	"strings"
)

// TerminalError marks a failure that retrying cannot fix, such as a message
// larger than the bus accepts. The bridge logs and counts the message, then
// moves on without it.
type TerminalError struct {
	Err error
}

func (e *TerminalError) Error() string { return "terminal: " + e.Err.Error() }
func (e *TerminalError) Unwrap() error { return e.Err }

// Terminal wraps err so that IsTerminal reports true for it.
// Terminal(nil) returns nil.
func Terminal(err error) error {
	if err == nil {
		return nil
	}
	return &TerminalError{Err: err}
}

// IsTerminal reports whether err, or any error it wraps, is a *TerminalError.
func IsTerminal(err error) bool {
	var t *TerminalError
	return errors.As(err, &t)
}

// BatchError reports the outcome of Publish message by message. Errors has
// one entry per message of the batch, in the same order; a nil entry means
// that message was accepted.
type BatchError struct {
	Errors []error
}

func (e *BatchError) Error() string {
	failed := 0
	var first error
	for _, err := range e.Errors {
		if err != nil {
			failed++
			if first == nil {
				first = err
			}
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d of %d messages failed", failed, len(e.Errors))
	if first != nil {
		b.WriteString(": ")
		b.WriteString(first.Error())
	}
	return b.String()
}

// PerMessage expands the error Publish returned for a batch of n messages
// into one error per message: nil when the message was accepted. A
// *BatchError of the wrong length is treated as a failure of every message,
// since it cannot say which ones were accepted.
func PerMessage(err error, n int) []error {
	out := make([]error, n)
	if err == nil {
		return out
	}
	var be *BatchError
	if errors.As(err, &be) && len(be.Errors) == n {
		copy(out, be.Errors)
		return out
	}
	for i := range out {
		out[i] = err
	}
	return out
}
