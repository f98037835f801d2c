package kafkastore

import (
	"strings"
	"testing"

	"github.com/kubebus/bridge/checkpoint"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name       string
		key, value string
		tombstone  bool
		want       parsed
		fails      bool
	}{
		{name: "namespaced object", key: "configmaps/ns/a", value: `{"uid":"u","rv":"5"}`,
			want: parsed{resource: "configmaps", key: "ns/a", pos: checkpoint.Position{UID: "u", ResourceVersion: "5"}}},
		{name: "cluster-scoped object", key: "namespaces/kube-system", value: `{"uid":"u","rv":"5"}`,
			want: parsed{resource: "namespaces", key: "kube-system", pos: checkpoint.Position{UID: "u", ResourceVersion: "5"}}},
		{name: "group resource", key: "deployments.apps/ns/web", value: `{"uid":"u","rv":"9"}`,
			want: parsed{resource: "deployments.apps", key: "ns/web", pos: checkpoint.Position{UID: "u", ResourceVersion: "9"}}},
		{name: "object with a view", key: "pods/ns/a", value: `{"uid":"u","rv":"5","view":"3f2a9c1dp.9a0b1c2d3e4f5061"}`,
			want: parsed{resource: "pods", key: "ns/a", pos: checkpoint.Position{UID: "u", ResourceVersion: "5", View: "3f2a9c1dp.9a0b1c2d3e4f5061"}}},
		{name: "tombstone", key: "configmaps/ns/a", tombstone: true,
			want: parsed{resource: "configmaps", key: "ns/a", deleted: true}},
		{name: "resource record", key: "configmaps", value: `{"lastResourceVersion":"77"}`,
			want: parsed{resource: "configmaps", last: "77"}},
		{name: "no key", key: "", value: `{}`, fails: true},
		{name: "no resource", key: "/ns/a", value: `{}`, fails: true},
		{name: "no object", key: "configmaps/", value: `{}`, fails: true},
		{name: "resource tombstone", key: "configmaps", tombstone: true, fails: true},
		{name: "bad position", key: "configmaps/ns/a", value: `[1]`, fails: true},
		{name: "null position", key: "configmaps/ns/a", value: `null`, fails: true},
		{name: "position without uid", key: "configmaps/ns/a", value: `{"rv":"5"}`, fails: true},
		{name: "bad resource record", key: "configmaps", value: `nope`, fails: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var value []byte
			if !tt.tombstone {
				value = []byte(tt.value)
			}
			got, err := parse([]byte(tt.key), value)
			switch {
			case tt.fails && err == nil:
				t.Errorf("parse = %+v, want an error", got)
			case tt.fails && tt.key != "" && !strings.Contains(err.Error(), tt.key):
				t.Errorf("parse: %v; want the error to name the key %q", err, tt.key)
			case !tt.fails && err != nil:
				t.Errorf("parse: %v", err)
			case !tt.fails && got != tt.want:
				t.Errorf("parse = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestKeysRoundTrip(t *testing.T) {
	for _, tt := range []struct{ resource, key string }{
		{"configmaps", "ns/a"}, {"namespaces", "default"}, {"widgets.example.com", "ns/with/slashes"},
	} {
		got, err := parse(objectKey(tt.resource, tt.key), []byte(`{"uid":"u","rv":"1"}`))
		if err != nil || got.resource != tt.resource || got.key != tt.key {
			t.Errorf("objectKey(%q, %q) parses as %+v, %v", tt.resource, tt.key, got, err)
		}
		got, err = parse(resourceKey(tt.resource), []byte(`{"lastResourceVersion":"1"}`))
		if err != nil || got.resource != tt.resource || got.key != "" {
			t.Errorf("resourceKey(%q) parses as %+v, %v", tt.resource, got, err)
		}
	}
}

func TestLaterResourceVersion(t *testing.T) {
	tests := []struct{ cur, next, want string }{
		{"", "5", "5"},
		{"5", "", "5"},
		{"9", "10", "10"},
		{"10", "9", "10"},
		{"zz", "aa", "aa"},
		{"10", "aa", "aa"},
	}
	for _, tt := range tests {
		if got := checkpoint.LaterResourceVersion(tt.cur, tt.next); got != tt.want {
			t.Errorf("checkpoint.LaterResourceVersion(%q, %q) = %q, want %q", tt.cur, tt.next, got, tt.want)
		}
	}
}
