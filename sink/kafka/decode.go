package kafka

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/kubebus/bridge/sink"
)

// DecodeRecord reads back the message of a record the sink wrote, in
// either CloudEvents mode, from its value and headers (by name). The
// content-type header tells the modes apart: a structured event is
// "application/cloudevents+json", a binary one carries ce_specversion. A
// tombstone (a nil value) decodes to nil and no error.
func DecodeRecord(value []byte, headers map[string]string) (*sink.Message, error) {
	if value == nil {
		return nil, nil
	}
	m := &sink.Message{}
	if strings.HasPrefix(headers[HeaderContentType], "application/cloudevents+json") {
		if err := m.UnmarshalJSON(value); err != nil {
			return nil, fmt.Errorf("kafka sink: %w", err)
		}
		return m, nil
	}
	if headers[headerPrefix+"specversion"] == "" {
		return nil, fmt.Errorf("kafka sink: not a CloudEvent: content-type %q and no %sspecversion header", headers[HeaderContentType], headerPrefix)
	}
	// Binary mode: put the attributes back into the structured form.
	event := map[string]any{"data": json.RawMessage(value), "datacontenttype": headers[HeaderContentType]}
	for name, v := range headers {
		attr, ok := strings.CutPrefix(name, headerPrefix)
		if !ok {
			continue
		}
		event[attr] = v
		if attr == "snapshot" || attr == "contentomitted" {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return nil, fmt.Errorf("kafka sink: header %s: %w", name, err)
			}
			event[attr] = b
		}
	}
	b, err := json.Marshal(event)
	if err != nil {
		return nil, fmt.Errorf("kafka sink: %w", err)
	}
	if err := m.UnmarshalJSON(b); err != nil {
		return nil, fmt.Errorf("kafka sink: %w", err)
	}
	return m, nil
}
