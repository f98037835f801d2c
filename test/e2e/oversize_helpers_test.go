package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/kubebus/bridge/sink"
	"github.com/kubebus/bridge/sink/sinktest"
	"github.com/kubebus/bridge/wire"
)

// busLimit is the message size limit of the buses in the oversize
// scenarios: small, so that objects pass it quickly, and far above the
// event of an ordinary ConfigMap.
const busLimit = 16 << 10

// ceModeEnv selects the CloudEvents content mode on either bus.
func ceModeEnv(mode string) map[string]string {
	return map[string]string{"BRIDGE_NATS_CE_MODE": mode, "BRIDGE_KAFKA_CE_MODE": mode}
}

// withEnv is env with extra on top, in a new map.
func withEnv(env, extra map[string]string) map[string]string {
	out := maps.Clone(env)
	maps.Copy(out, extra)
	return out
}

// pageOf is ConfigMap data of about n bytes of c.
func pageOf(c byte, n int) map[string]string {
	return map[string]string{"page": strings.Repeat(string(c), n)}
}

// contentOmitted reports whether m carries only its object's identity,
// marked as the bridge marks a change too large for the bus.
func contentOmitted(m *wire.Message) bool { return m.ContentOmitted }

// identityOnly checks that m's data is the identity of its object and
// nothing else: apiVersion, kind, and metadata namespace, name, uid and
// resourceVersion, with rv the object's resourceVersion. It returns what
// is wrong, or "".
func identityOnly(m *wire.Message, uid, rv string) string {
	var data struct {
		Object map[string]json.RawMessage `json:"object"`
	}
	if err := json.Unmarshal(m.Data, &data); err != nil {
		return fmt.Sprintf("data: %v", err)
	}
	if fields := slices.Sorted(maps.Keys(data.Object)); !slices.Equal(fields, []string{"apiVersion", "kind", "metadata"}) {
		return fmt.Sprintf("object has %v, want apiVersion, kind and metadata only: %.200s", fields, m.Data)
	}
	var meta map[string]string
	if err := json.Unmarshal(data.Object["metadata"], &meta); err != nil {
		return fmt.Sprintf("metadata: %v: %s", err, data.Object["metadata"])
	}
	want := map[string]string{"namespace": m.Namespace, "name": m.Name, "uid": uid, "resourceVersion": rv}
	if !maps.Equal(meta, want) {
		return fmt.Sprintf("metadata %v, want %v", meta, want)
	}
	return ""
}

// eventsOf returns the events of one object, in stream order.
func eventsOf(msgs []*wire.Message, name string) []*wire.Message {
	var out []*wire.Message
	for _, m := range msgs {
		if m.Name == name {
			out = append(out, m)
		}
	}
	return out
}

// describe lists events briefly, for failure messages.
func describe(msgs []*wire.Message) string {
	var parts []string
	for _, m := range msgs {
		p := fmt.Sprintf("%s %s@%s", m.Name, m.Action, m.ResourceVersion)
		if m.Snapshot {
			p += "(s)"
		}
		if contentOmitted(m) {
			p += "(omitted)"
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, ", ")
}

// tombstones counts the tombstones of each key of the ConfigMaps of ns,
// for a Kafka bus; nil for other buses.
func tombstones(t *testing.T, b bus, ns string) map[string]int {
	t.Helper()
	kb, ok := b.(*kafkaBus)
	if !ok {
		return nil
	}
	out := map[string]int{}
	for _, r := range kb.records(t, ns) {
		if r.msg == nil {
			out[r.key]++
		}
	}
	return out
}

// newEvents is what after holds that before did not, by event id.
func newEvents(before, after []*wire.Message) []*wire.Message {
	seen := map[string]bool{}
	for _, m := range before {
		seen[m.ID] = true
	}
	var out []*wire.Message
	for _, m := range after {
		if !seen[m.ID] {
			out = append(out, m)
		}
	}
	return out
}

// limitedSink is a sink for a bridge run in this process that takes
// messages of at most limit bytes (data and attributes, as structured
// mode writes them) and refuses larger ones as a bus does. Its Accepted
// are what it takes, in order, and its Attempts every message sent.
func limitedSink(limit int) *sinktest.Recorder {
	return &sinktest.Recorder{Respond: func(_ context.Context, _ int, msgs []*wire.Message) error {
		errs := make([]error, len(msgs))
		failed := false
		for i, m := range msgs {
			b, err := m.MarshalJSON()
			if err != nil {
				return err
			}
			if len(b) > limit {
				errs[i] = sink.TooLarge(fmt.Errorf("limited sink: %d bytes over the limit of %d", len(b), limit))
				failed = true
			}
		}
		if failed {
			return &sink.BatchError{Errors: errs}
		}
		return nil
	}}
}
