package wire

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// observed has a non-UTC zone and nanoseconds, so that the round trip has
// to keep both the instant and its precision.
var observed = time.Date(2026, 3, 4, 5, 6, 7, 123456789, time.FixedZone("CET", 3600))

func namespacedMessage() *Message {
	return &Message{
		ID:              "0123456789abcdef0123456789abcdef",
		Source:          "/clusters/prod/api/v1/configmaps",
		Type:            "io.kubebus.object.updated",
		Subject:         "team-a/settings",
		Time:            observed,
		Action:          "updated",
		Resource:        schema.GroupVersionResource{Version: "v1", Resource: "configmaps"},
		ResourceVersion: "4711",
		UID:             "7c4f-uid",
		Kind:            "ConfigMap",
		APIVersion:      "v1",
		Namespace:       "team-a",
		Name:            "settings",
		Cluster:         "prod",
		Snapshot:        true,
		Data:            json.RawMessage(`{"object":{"kind":"ConfigMap","data":{"k":"v"}}}`),
	}
}

func clusterScopedMessage() *Message {
	return &Message{
		ID:              "fedcba9876543210fedcba9876543210",
		Source:          "/clusters/prod/apis/rbac.authorization.k8s.io/v1/clusterroles",
		Type:            "io.kubebus.object.deleted",
		Subject:         "viewer",
		Time:            observed.UTC(),
		Action:          "deleted",
		Resource:        schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"},
		ResourceVersion: "99",
		UID:             "c1-uid",
		Kind:            "ClusterRole",
		APIVersion:      "rbac.authorization.k8s.io/v1",
		Name:            "viewer",
		Cluster:         "prod",
		Data:            json.RawMessage(`{"object":{"kind":"ClusterRole"}}`),
	}
}

// omittedMessage is the delete of an object whose full event was too
// large: its data is the object's identity only.
func omittedMessage() *Message {
	m := clusterScopedMessage()
	m.ContentOmitted = true
	m.Data = json.RawMessage(`{"object":{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRole","metadata":{"name":"viewer","resourceVersion":"98","uid":"c1-uid"}}}`)
	return m
}

// leftFilterMessage is the delete of an object that no longer matches the
// bridge's filter.
func leftFilterMessage() *Message {
	m := namespacedMessage()
	m.Type, m.Action, m.Snapshot = "io.kubebus.object.deleted", "deleted", false
	m.Reason = "left-filter"
	return m
}

// The reason attribute is written only when set, after contentomitted and
// before data.
func TestMessageReason(t *testing.T) {
	m := leftFilterMessage()
	b, err := m.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(`"snapshot":false,"reason":"left-filter","data":{"object":`)) {
		t.Errorf("MarshalJSON of a message with a reason: %s", b)
	}
	m.ContentOmitted = true
	if b, _ = m.MarshalJSON(); !bytes.Contains(b, []byte(`"contentomitted":true,"reason":"left-filter","data":`)) {
		t.Errorf("MarshalJSON of a message with a reason and its content omitted: %s", b)
	}
	if b, _ = namespacedMessage().MarshalJSON(); bytes.Contains(b, []byte("reason")) {
		t.Errorf("MarshalJSON of a message without a reason: %s", b)
	}
}

// The contentomitted attribute is written only when true, as the last
// attribute before data.
func TestMessageContentOmitted(t *testing.T) {
	b, err := omittedMessage().MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(`"snapshot":false,"contentomitted":true,"data":{"object":`)) {
		t.Errorf("MarshalJSON of a marked message: %s", b)
	}
	b, err = clusterScopedMessage().MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(b, []byte("contentomitted")) {
		t.Errorf("MarshalJSON of an unmarked message: %s", b)
	}
}

func TestMessageRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		msg  *Message
	}{
		{"namespaced core resource", namespacedMessage()},
		{"cluster-scoped grouped resource", clusterScopedMessage()},
		{"content omitted", omittedMessage()},
		{"left the filter", leftFilterMessage()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := json.Marshal(tt.msg)
			if err != nil {
				t.Fatalf("Marshal: %v", err)
			}
			var got Message
			if err := json.Unmarshal(b, &got); err != nil {
				t.Fatalf("Unmarshal(%s): %v", b, err)
			}
			if !got.Time.Equal(tt.msg.Time) {
				t.Errorf("Time = %v, want %v", got.Time, tt.msg.Time)
			}
			want := *tt.msg
			want.Time, got.Time = time.Time{}, time.Time{}
			// Data is compacted JSON either way; compare it as text.
			if string(got.Data) != string(want.Data) {
				t.Errorf("Data = %s, want %s", got.Data, want.Data)
			}
			want.Data, got.Data = nil, nil
			if !reflect.DeepEqual(got, want) {
				t.Errorf("round trip:\n got  %+v\n want %+v", got, want)
			}
			if got.Key() != tt.msg.Subject {
				t.Errorf("Key() = %q, want the subject %q", got.Key(), tt.msg.Subject)
			}
		})
	}
}

func TestMessageCloudEventsAttributes(t *testing.T) {
	tests := []struct {
		name          string
		msg           *Message
		wantNamespace bool
	}{
		{"namespaced", namespacedMessage(), true},
		{"cluster-scoped", clusterScopedMessage(), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := tt.msg.MarshalJSON()
			if err != nil {
				t.Fatalf("MarshalJSON: %v", err)
			}
			var attrs map[string]any
			if err := json.Unmarshal(b, &attrs); err != nil {
				t.Fatalf("not a JSON object: %v: %s", err, b)
			}
			want := map[string]any{
				"specversion":     "1.0",
				"id":              tt.msg.ID,
				"source":          tt.msg.Source,
				"type":            tt.msg.Type,
				"subject":         tt.msg.Subject,
				"time":            tt.msg.Time.UTC().Format(time.RFC3339Nano),
				"datacontenttype": "application/json",
				"resourceversion": tt.msg.ResourceVersion,
				"uid":             tt.msg.UID,
				"kind":            tt.msg.Kind,
				"apiversion":      tt.msg.APIVersion,
				"name":            tt.msg.Name,
				"cluster":         tt.msg.Cluster,
				"snapshot":        tt.msg.Snapshot,
			}
			for k, v := range want {
				if got, ok := attrs[k]; !ok {
					t.Errorf("attribute %q missing", k)
				} else if got != v {
					t.Errorf("attribute %q = %v, want %v", k, got, v)
				}
			}
			ns, hasNS := attrs["namespace"]
			if hasNS != tt.wantNamespace {
				t.Errorf("namespace present = %v, want %v (%s)", hasNS, tt.wantNamespace, b)
			}
			if tt.wantNamespace && ns != tt.msg.Namespace {
				t.Errorf("namespace = %v, want %q", ns, tt.msg.Namespace)
			}
			if _, ok := attrs["data"].(map[string]any); !ok {
				t.Errorf("data is %T, want an embedded JSON object", attrs["data"])
			}
			// The CloudEvents time attribute is RFC 3339 in UTC.
			if s, _ := attrs["time"].(string); !strings.HasSuffix(s, "Z") {
				t.Errorf("time = %q, want UTC", s)
			}
			// Routing information is not an event attribute.
			for _, k := range []string{"action", "resource", "Resource", "Action"} {
				if _, ok := attrs[k]; ok {
					t.Errorf("unexpected attribute %q", k)
				}
			}
			if len(attrs) != len(want)+1+boolInt(hasNS) {
				t.Errorf("got %d attributes, want %d: %s", len(attrs), len(want)+1+boolInt(hasNS), b)
			}
		})
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestMessageMarshalLikeEncodingJSON: MarshalJSON writes what encoding/json
// makes of the structured form with HTML escaping off, escapes included.
func TestMessageMarshalLikeEncodingJSON(t *testing.T) {
	odd := namespacedMessage()
	odd.Name = "<a&b> \"quoted\" \\ tab\t \u2028 é \xff"
	odd.Subject = "team-a/" + odd.Name
	odd.Cluster = "\x00\x1f"
	odd.Time = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	noData := clusterScopedMessage()
	noData.Data = nil
	tests := []struct {
		name string
		msg  *Message
	}{
		{"namespaced", namespacedMessage()},
		{"cluster-scoped", clusterScopedMessage()},
		{"characters to escape", odd},
		{"no data", noData},
		{"content omitted", omittedMessage()},
		{"left the filter", leftFilterMessage()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := tt.msg
			var buf bytes.Buffer
			enc := json.NewEncoder(&buf)
			enc.SetEscapeHTML(false)
			err := enc.Encode(oracle{
				SpecVersion: SpecVersion, ID: m.ID, Source: m.Source, Type: m.Type, Subject: m.Subject,
				Time: m.Time.UTC().Format(time.RFC3339Nano), DataContentType: ContentType,
				ResourceVersion: m.ResourceVersion, UID: m.UID, Kind: m.Kind, APIVersion: m.APIVersion,
				Namespace: m.Namespace, Name: m.Name, Cluster: m.Cluster, Snapshot: m.Snapshot, ContentOmitted: m.ContentOmitted, Reason: m.Reason, Data: m.Data,
			})
			if err != nil {
				t.Fatal(err)
			}
			want := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
			got, err := m.MarshalJSON()
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != string(want) {
				t.Errorf("MarshalJSON\n got %s\nwant %s", got, want)
			}
		})
	}
}

func TestMessageUnmarshalRejects(t *testing.T) {
	valid := func() map[string]any {
		b, err := namespacedMessage().MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	tests := []struct {
		name   string
		change func(m map[string]any)
		want   string
	}{
		{"other specversion", func(m map[string]any) { m["specversion"] = "0.3" }, "specversion"},
		{"missing specversion", func(m map[string]any) { delete(m, "specversion") }, "specversion"},
		{"unparsable time", func(m map[string]any) { m["time"] = "yesterday" }, "time"},
		{"bad apiversion", func(m map[string]any) { m["apiversion"] = "a/b/c" }, "apiversion"},
		{"attribute of the wrong type", func(m map[string]any) { m["snapshot"] = "yes" }, "decode event"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := valid()
			tt.change(m)
			b, err := json.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			var got Message
			err = json.Unmarshal(b, &got)
			if err == nil {
				t.Fatalf("Unmarshal accepted %s", b)
			}
			if !strings.Contains(err.Error(), "wire: ") || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q should name the package and %q", err, tt.want)
			}
		})
	}
}

// oracle is the JSON form of a message as encoding/json writes it:
// the oracle MarshalJSON is checked against, written apart from the
// attribute table.
type oracle struct {
	SpecVersion     string          `json:"specversion"`
	ID              string          `json:"id"`
	Source          string          `json:"source"`
	Type            string          `json:"type"`
	Subject         string          `json:"subject"`
	Time            string          `json:"time"`
	DataContentType string          `json:"datacontenttype"`
	ResourceVersion string          `json:"resourceversion"`
	UID             string          `json:"uid"`
	Kind            string          `json:"kind"`
	APIVersion      string          `json:"apiversion"`
	Namespace       string          `json:"namespace,omitempty"`
	Name            string          `json:"name"`
	Cluster         string          `json:"cluster"`
	Snapshot        bool            `json:"snapshot"`
	ContentOmitted  bool            `json:"contentomitted,omitempty"`
	Reason          string          `json:"reason,omitempty"`
	Data            json.RawMessage `json:"data"`
}
