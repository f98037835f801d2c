package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubebus/bridge/wire"
)

// rec is a record as the bridge writes it in structured mode; action ""
// is a tombstone.
type rec struct {
	key, action, uid string
	rv               int
}

func (r rec) encode(t *testing.T) ([]byte, map[string]string) {
	t.Helper()
	if r.action == "" {
		return nil, nil
	}
	ns, name, _ := strings.Cut(r.key, "/")
	m := &wire.Message{
		ID: fmt.Sprint(r.uid, r.rv), Source: "/clusters/c/api/v1/configmaps", Type: "io.kubebus.object." + r.action,
		Subject: r.key, Time: time.Now(), Action: r.action, Resource: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"},
		ResourceVersion: fmt.Sprint(r.rv), UID: r.uid, Kind: "ConfigMap", APIVersion: "v1", Namespace: ns, Name: name, Cluster: "c",
		Data: json.RawMessage(`{"object":{}}`),
	}
	v, err := m.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return v, map[string]string{wire.Kafka.ContentTypeHeader(): wire.KafkaStructuredContentType}
}

func TestObjectsApply(t *testing.T) {
	tests := []struct {
		name    string
		recs    []rec
		changes int      // lines that report a change
		live    []string // key@rv of what is left
	}{
		{"add and update", []rec{{"ns/a", "added", "u1", 1}, {"ns/a", "updated", "u1", 2}, {"ns/b", "added", "u2", 3}}, 3, []string{"ns/a@2", "ns/b@3"}},
		{"delete then tombstone", []rec{{"ns/a", "added", "u1", 1}, {"ns/a", "deleted", "u1", 2}, {"ns/a", "", "", 0}}, 2, nil},
		{"tombstone alone forgets", []rec{{"ns/a", "added", "u1", 1}, {"ns/a", "", "", 0}}, 2, nil},
		{"repeats change nothing", []rec{{"ns/a", "added", "u1", 1}, {"ns/a", "added", "u1", 1}, {"ns/a", "updated", "u1", 2}, {"ns/a", "updated", "u1", 2}}, 2, []string{"ns/a@2"}},
		{"recreated under the same name", []rec{{"ns/a", "added", "u1", 1}, {"ns/a", "deleted", "u1", 2}, {"ns/a", "", "", 0}, {"ns/a", "added", "u2", 3}}, 3, []string{"ns/a@3"}},
		{"tombstone of an unknown key", []rec{{"ns/x", "", "", 0}}, 0, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := NewObjects()
			changes := 0
			for _, r := range tt.recs {
				v, h := r.encode(t)
				line, err := o.Apply("kube.configmaps", r.key, v, h)
				if err != nil {
					t.Fatal(err)
				}
				if line != "" {
					changes++
				}
			}
			if changes != tt.changes {
				t.Errorf("%d changes reported, want %d", changes, tt.changes)
			}
			if o.Len() != len(tt.live) {
				t.Errorf("%d live objects, want %d", o.Len(), len(tt.live))
			}
			for _, l := range tt.live {
				key, rv, _ := strings.Cut(l, "@")
				if obj, ok := o.Get("kube.configmaps", key); !ok || obj.ResourceVersion != rv {
					t.Errorf("%s: %+v, %v; want it live at %s", key, obj, ok, rv)
				}
			}
		})
	}
}

func TestObjectsApplyNotABridgeRecord(t *testing.T) {
	if _, err := NewObjects().Apply("t", "k", []byte("hello"), map[string]string{"content-type": "text/plain"}); err == nil {
		t.Error("a record that is no CloudEvent applied without error")
	}
}
