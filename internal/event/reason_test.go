package event

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/kubebus/bridge/source"
)

// A delete of an object that left the filter carries the reason
// attribute, "left-filter", on every path the encoder writes (the raw
// object, the parsed one, the identity alone); other events carry none.
func TestEncodeReason(t *testing.T) {
	enc := Encoder{Cluster: "prod"}
	for _, fx := range fixtures {
		data := readFixture(t, fx.name)
		for _, tt := range pathDeltas(t, fx.resource, data) {
			for _, reason := range []source.Reason{source.ReasonLeftFilter, ""} {
				t.Run(fx.name+"/"+tt.name+"/"+string(reason), func(t *testing.T) {
					d := tt.d
					d.Type, d.Reason = source.Deleted, reason
					m, err := enc.Encode(&d)
					if err != nil {
						t.Fatal(err)
					}
					if m.Reason != string(reason) {
						t.Errorf("Reason = %q, want %q", m.Reason, reason)
					}
					var attrs map[string]json.RawMessage
					if err := json.Unmarshal(m.Encoded, &attrs); err != nil {
						t.Fatalf("event is not a JSON object: %v", err)
					}
					got, ok := attrs["reason"]
					switch {
					case reason == "" && ok:
						t.Errorf("event without a reason has the attribute reason: %s", got)
					case reason != "" && string(got) != `"left-filter"`:
						t.Errorf("attribute reason = %s, want \"left-filter\"", got)
					}
					fresh := *m
					fresh.Encoded = nil
					if want, _ := fresh.MarshalJSON(); !bytes.Equal(m.Encoded, want) {
						t.Errorf("Encoded differs from MarshalJSON of the message\n got %.300s\nwant %.300s", m.Encoded, want)
					}
				})
			}
		}
	}
}
