package nats

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/nats-io/nats.go"

	"github.com/kubebus/bridge/sink"
)

// Decode reads a message the sink published, in either content mode, back
// into the event. Consumers can use it instead of telling the modes apart
// themselves: a Content-Type of application/cloudevents+json (or no ce-id
// header) means structured mode.
func Decode(nm *nats.Msg) (*sink.Message, error) {
	m := &sink.Message{}
	if nm.Header.Get(HeaderPrefix+"id") == "" {
		if err := m.UnmarshalJSON(nm.Data); err != nil {
			return nil, fmt.Errorf("nats sink: decode %s: %w", nm.Subject, err)
		}
		return m, nil
	}
	// Binary mode: rebuild the structured form and decode that, so that
	// both modes are read by the same rules.
	doc := map[string]any{"data": json.RawMessage(nm.Data)}
	if len(nm.Data) == 0 {
		doc["data"] = nil
	}
	for name, values := range nm.Header {
		attr, ok := cutPrefixFold(name, HeaderPrefix)
		if !ok || len(values) == 0 {
			continue
		}
		v, err := percentDecode(values[0])
		if err != nil {
			return nil, fmt.Errorf("nats sink: decode %s: header %s: %w", nm.Subject, name, err)
		}
		attr = strings.ToLower(attr)
		if attr == "snapshot" || attr == "contentomitted" {
			snap, err := strconv.ParseBool(v)
			if err != nil {
				return nil, fmt.Errorf("nats sink: decode %s: header %s: %w", nm.Subject, name, err)
			}
			doc[attr] = snap
			continue
		}
		doc[attr] = v
	}
	body, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("nats sink: decode %s: %w", nm.Subject, err)
	}
	if err := m.UnmarshalJSON(body); err != nil {
		return nil, fmt.Errorf("nats sink: decode %s: %w", nm.Subject, err)
	}
	return m, nil
}

func cutPrefixFold(s, prefix string) (string, bool) {
	if len(s) < len(prefix) || !strings.EqualFold(s[:len(prefix)], prefix) {
		return s, false
	}
	return s[len(prefix):], true
}

// percentDecode reverses percentEncode; it accepts lower-case digits and
// needlessly encoded bytes, as the binding asks of receivers.
func percentDecode(v string) (string, error) {
	if !strings.Contains(v, "%") {
		return v, nil
	}
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		if v[i] != '%' {
			b.WriteByte(v[i])
			continue
		}
		if i+2 >= len(v) {
			return "", fmt.Errorf("%q: truncated escape", v)
		}
		n, err := strconv.ParseUint(v[i+1:i+3], 16, 8)
		if err != nil {
			return "", fmt.Errorf("%q: bad escape %q", v, v[i:i+3])
		}
		b.WriteByte(byte(n))
		i += 2
	}
	if !utf8.ValidString(b.String()) {
		return "", fmt.Errorf("%q: not UTF-8 once decoded", v)
	}
	return b.String(), nil
}
