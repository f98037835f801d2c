package sink

import (
	"errors"
	"fmt"
	"strings"

	"github.com/kubebus/bridge/wire"
)

// TerminalError marks a failure that retrying cannot fix. The bridge logs
// and counts the message, then moves on without it; except when the
// failure is also ErrTooLarge, see there.
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

// ErrTooLarge is what the error of a message larger than the bus takes
// wraps (through TooLarge, which also makes it terminal). Such a message
// is not skipped: the bridge publishes in its place the same event with
// only the object's identity as data, marked ContentOmitted. Only when
// that one is too large as well is the change skipped.
//
// A sink must treat a too-large message that is not marked ContentOmitted
// like a retryable failure as far as order goes: it must not accept a
// later message with the same key in the same batch, since the bridge
// sends the replacement, and the later messages after it.
var ErrTooLarge = errors.New("larger than the bus takes")

// TooLarge wraps err, the failure of a message larger than the bus takes,
// into a terminal error that errors.Is(err, ErrTooLarge) reports. err
// should say how large the message was and which limit it passed.
// TooLarge(nil) returns nil.
func TooLarge(err error) error {
	if err == nil {
		return nil
	}
	return &TerminalError{Err: tooLarge{err}}
}

// tooLarge makes errors.Is report ErrTooLarge for the error it wraps,
// without changing its text.
type tooLarge struct{ error }

func (e tooLarge) Unwrap() error        { return e.error }
func (e tooLarge) Is(target error) bool { return target == ErrTooLarge }

// IsTooLarge reports whether err, or any error it wraps, is ErrTooLarge.
func IsTooLarge(err error) bool { return errors.Is(err, ErrTooLarge) }

// HoldsKey reports whether the failure err of message m must keep the
// later messages with m's key from being accepted in the same batch: a
// failure that a retry may fix, and a message too large for the bus that
// is not yet marked ContentOmitted (the bridge sends its replacement, then
// the later messages again). A terminal failure of any other kind does
// not hold them back: the bridge skips that message and goes on.
func HoldsKey(m *wire.Message, err error) bool {
	return err != nil && (!IsTerminal(err) || (IsTooLarge(err) && !m.ContentOmitted))
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
