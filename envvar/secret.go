package envvar

import (
	"log/slog"
	"strconv"
)

// Secret is a string that does not show itself: printed, logged or
// marshalled it reads "[redacted]" (or "" when empty). Use string(s) where
// the value itself is needed, and only there.
type Secret string

// Redacted is what a set Secret shows instead of its value.
const Redacted = "[redacted]"

func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return Redacted
}

// GoString keeps %#v from printing the value.
func (s Secret) GoString() string { return strconv.Quote(s.String()) }

// LogValue keeps slog from printing the value.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }

// MarshalText keeps encoders (JSON, YAML) from printing the value.
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.String()), nil }
