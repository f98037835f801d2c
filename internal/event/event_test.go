package event

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubebus/bridge/source"
	"github.com/kubebus/bridge/test/synthetic"
	"github.com/kubebus/bridge/wire"
)

var (
	configmaps = source.Resource{
		GroupVersionResource: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"},
		Kind:                 "ConfigMap",
		Namespaced:           true,
	}
	deployments = source.Resource{
		GroupVersionResource: schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"},
		Kind:                 "Deployment",
		Namespaced:           true,
	}
	clusterroles = source.Resource{
		GroupVersionResource: schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"},
		Kind:                 "ClusterRole",
	}
)

func object(r source.Resource, ns, name, uid, rv string, data map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetAPIVersion(r.APIVersion())
	u.SetKind(r.Kind)
	u.SetNamespace(ns)
	u.SetName(name)
	u.SetUID(types.UID(uid))
	u.SetResourceVersion(rv)
	if data != nil {
		u.Object["data"] = data
	}
	return u
}

func baseDelta() source.Delta {
	return source.Delta{
		Type:            source.Updated,
		Resource:        configmaps,
		Namespace:       "team-a",
		Name:            "settings",
		UID:             "uid-1",
		ResourceVersion: "42",
		Observed:        time.Date(2026, 5, 6, 7, 8, 9, 10, time.UTC),
		Object:          object(configmaps, "team-a", "settings", "uid-1", "42", map[string]any{"k": "v2"}),
	}
}

func TestIDIsDeterministic(t *testing.T) {
	a, b := baseDelta(), baseDelta()
	if ID(&a) != ID(&b) {
		t.Fatalf("equal deltas got ids %s and %s", ID(&a), ID(&b))
	}
	if !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(ID(&a)) {
		t.Errorf("id %q is not 32 lowercase hex digits", ID(&a))
	}

	// What the bridge observed about the change, rather than which change
	// it is, must not change the id: a replay after a restart has another
	// Observed time, and a relist may find the same change as a snapshot.
	same := []struct {
		name   string
		change func(d *source.Delta)
	}{
		{"observed later", func(d *source.Delta) { d.Observed = d.Observed.Add(time.Hour) }},
		{"found by a relist", func(d *source.Delta) { d.Snapshot = true }},
		{"with the old object", func(d *source.Delta) { d.OldObject = object(configmaps, "team-a", "settings", "uid-1", "41", nil) }},
		{"another copy of the object", func(d *source.Delta) { d.Object = d.Object.DeepCopy() }},
		{"another version of the same resource", func(d *source.Delta) { d.Resource.Version = "v2" }},
	}
	for _, tt := range same {
		t.Run("same id/"+tt.name, func(t *testing.T) {
			d := baseDelta()
			tt.change(&d)
			if ID(&d) != ID(&a) {
				t.Errorf("id changed from %s to %s", ID(&a), ID(&d))
			}
		})
	}
}

func TestIDDiffers(t *testing.T) {
	base := baseDelta()
	tests := []struct {
		name   string
		change func(d *source.Delta)
	}{
		{"uid", func(d *source.Delta) { d.UID = "uid-2" }},
		{"resourceVersion", func(d *source.Delta) { d.ResourceVersion = "43" }},
		{"type", func(d *source.Delta) { d.Type = source.Deleted }},
		{"type added", func(d *source.Delta) { d.Type = source.Added }},
		{"name", func(d *source.Delta) { d.Name = "other" }},
		{"namespace", func(d *source.Delta) { d.Namespace = "team-b" }},
		{"cluster-scoped", func(d *source.Delta) { d.Namespace = "" }},
		{"resource", func(d *source.Delta) { d.Resource = deployments }},
		{"group only", func(d *source.Delta) { d.Resource.Group = "example.com" }},
		// The parts are separated, so moving characters from one to the
		// next gives another id even though the concatenation is the same.
		{"namespace and name split differently", func(d *source.Delta) { d.Namespace, d.Name = "team-as", "ettings" }},
		{"uid and resourceVersion split differently", func(d *source.Delta) { d.UID, d.ResourceVersion = "uid-14", "2" }},
	}
	seen := map[string]string{ID(&base): "base"}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := baseDelta()
			tt.change(&d)
			id := ID(&d)
			if prev, ok := seen[id]; ok {
				t.Errorf("id %s equals the id of %q", id, prev)
			}
			seen[id] = tt.name
		})
	}
}

func TestSource(t *testing.T) {
	tests := []struct {
		name     string
		cluster  string
		resource source.Resource
		want     string
	}{
		{"core group", "prod", configmaps, "/clusters/prod/api/v1/configmaps"},
		{"named group", "prod", deployments, "/clusters/prod/apis/apps/v1/deployments"},
		{"cluster-scoped, dotted group", "eu-1", clusterroles, "/clusters/eu-1/apis/rbac.authorization.k8s.io/v1/clusterroles"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Source(tt.cluster, tt.resource); got != tt.want {
				t.Errorf("Source = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestEncode(t *testing.T) {
	enc := Encoder{Cluster: "prod"}
	tests := []struct {
		name  string
		delta func() source.Delta
		want  wire.Message // Data and Time are checked separately
	}{
		{
			name:  "namespaced update",
			delta: baseDelta,
			want: wire.Message{
				Source: "/clusters/prod/api/v1/configmaps", Type: "io.kubebus.object.updated",
				Subject: "team-a/settings", Action: "updated", Resource: configmaps.GroupVersionResource,
				ResourceVersion: "42", UID: "uid-1", Kind: "ConfigMap", APIVersion: "v1",
				Namespace: "team-a", Name: "settings", Cluster: "prod",
			},
		},
		{
			name: "cluster-scoped snapshot delete",
			delta: func() source.Delta {
				return source.Delta{
					Type: source.Deleted, Resource: clusterroles, Name: "viewer", UID: "uid-9", ResourceVersion: "7",
					Snapshot: true, Observed: time.Unix(100, 0),
					Object: object(clusterroles, "", "viewer", "uid-9", "7", nil),
				}
			},
			want: wire.Message{
				Source: "/clusters/prod/apis/rbac.authorization.k8s.io/v1/clusterroles", Type: "io.kubebus.object.deleted",
				Subject: "viewer", Action: "deleted", Resource: clusterroles.GroupVersionResource,
				ResourceVersion: "7", UID: "uid-9", Kind: "ClusterRole", APIVersion: "rbac.authorization.k8s.io/v1",
				Name: "viewer", Cluster: "prod", Snapshot: true,
			},
		},
		{
			name: "left the filter",
			delta: func() source.Delta {
				d := baseDelta()
				d.Type, d.Reason = source.Deleted, source.ReasonLeftFilter
				return d
			},
			want: wire.Message{
				Source: "/clusters/prod/api/v1/configmaps", Type: "io.kubebus.object.deleted",
				Subject: "team-a/settings", Action: "deleted", Resource: configmaps.GroupVersionResource,
				ResourceVersion: "42", UID: "uid-1", Kind: "ConfigMap", APIVersion: "v1",
				Namespace: "team-a", Name: "settings", Cluster: "prod", Reason: "left-filter",
			},
		},
		{
			name: "grouped add",
			delta: func() source.Delta {
				return source.Delta{
					Type: source.Added, Resource: deployments, Namespace: "web", Name: "front", UID: "uid-3", ResourceVersion: "5",
					Object: object(deployments, "web", "front", "uid-3", "5", nil),
				}
			},
			want: wire.Message{
				Source: "/clusters/prod/apis/apps/v1/deployments", Type: "io.kubebus.object.added",
				Subject: "web/front", Action: "added", Resource: deployments.GroupVersionResource,
				ResourceVersion: "5", UID: "uid-3", Kind: "Deployment", APIVersion: "apps/v1",
				Namespace: "web", Name: "front", Cluster: "prod",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := tt.delta()
			got, err := enc.Encode(&d)
			if err != nil {
				t.Fatalf("Encode: %v", err)
			}
			if got.ID != ID(&d) {
				t.Errorf("ID = %q, want ID(d) = %q", got.ID, ID(&d))
			}
			if !got.Time.Equal(d.Observed) {
				t.Errorf("Time = %v, want the observed time %v", got.Time, d.Observed)
			}
			want := tt.want
			want.ID, want.Time, want.Data = got.ID, got.Time, got.Data
			if !equalMessages(got, &want) {
				t.Errorf("Encode:\n got  %+v\n want %+v", *got, want)
			}
			if !strings.HasSuffix(got.Type, "."+got.Action) {
				t.Errorf("type %q does not end in the action %q", got.Type, got.Action)
			}
			// The message survives its own JSON form.
			b, err := got.MarshalJSON()
			if err != nil {
				t.Fatalf("MarshalJSON: %v", err)
			}
			var back wire.Message
			if err := back.UnmarshalJSON(b); err != nil {
				t.Fatalf("UnmarshalJSON: %v", err)
			}
			if back.Resource != got.Resource || back.Action != got.Action {
				t.Errorf("decoded resource %v action %q, want %v %q", back.Resource, back.Action, got.Resource, got.Action)
			}
		})
	}
}

func equalMessages(a, b *wire.Message) bool {
	x, y := *a, *b
	x.Data, y.Data = nil, nil
	return x.ID == y.ID && x.Source == y.Source && x.Type == y.Type && x.Subject == y.Subject &&
		x.Time.Equal(y.Time) && x.Action == y.Action && x.Resource == y.Resource &&
		x.ResourceVersion == y.ResourceVersion && x.UID == y.UID && x.Kind == y.Kind &&
		x.APIVersion == y.APIVersion && x.Namespace == y.Namespace && x.Name == y.Name &&
		x.Cluster == y.Cluster && x.Snapshot == y.Snapshot && x.ContentOmitted == y.ContentOmitted && x.Reason == y.Reason
}

func TestEncodeData(t *testing.T) {
	enc := Encoder{Cluster: "prod"}
	tests := []struct {
		name    string
		old     *unstructured.Unstructured
		wantOld bool
	}{
		{"without the old object", nil, false},
		{"with the old object", object(configmaps, "team-a", "settings", "uid-1", "41", map[string]any{"k": "v1"}), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := baseDelta()
			d.OldObject = tt.old
			msg, err := enc.Encode(&d)
			if err != nil {
				t.Fatalf("Encode: %v", err)
			}
			var data map[string]json.RawMessage
			if err := json.Unmarshal(msg.Data, &data); err != nil {
				t.Fatalf("Data is not a JSON object: %v: %s", err, msg.Data)
			}
			wantKeys := 1
			if tt.wantOld {
				wantKeys = 2
			}
			if len(data) != wantKeys {
				t.Errorf("Data has keys %v, want %d", keys(data), wantKeys)
			}
			assertObject(t, data["object"], d.Object)
			old, hasOld := data["oldObject"]
			if hasOld != tt.wantOld {
				t.Fatalf("oldObject present = %v, want %v: %s", hasOld, tt.wantOld, msg.Data)
			}
			if tt.wantOld {
				assertObject(t, old, tt.old)
			}
		})
	}
}

func assertObject(t *testing.T, raw json.RawMessage, want *unstructured.Unstructured) {
	t.Helper()
	if raw == nil {
		t.Fatal("object missing")
	}
	var got unstructured.Unstructured
	if err := got.UnmarshalJSON(raw); err != nil {
		t.Fatalf("object does not decode: %v: %s", err, raw)
	}
	if got.GetResourceVersion() != want.GetResourceVersion() || got.GetUID() != want.GetUID() ||
		got.GetName() != want.GetName() || got.GetKind() != want.GetKind() {
		t.Errorf("object = %s/%s uid %s rv %s, want %s/%s uid %s rv %s",
			got.GetKind(), got.GetName(), got.GetUID(), got.GetResourceVersion(),
			want.GetKind(), want.GetName(), want.GetUID(), want.GetResourceVersion())
	}
	gotData, _, _ := unstructured.NestedStringMap(got.Object, "data")
	wantData, _, _ := unstructured.NestedStringMap(want.Object, "data")
	if len(gotData) != len(wantData) {
		t.Errorf("object data = %v, want %v", gotData, wantData)
	}
	for k, v := range wantData {
		if gotData[k] != v {
			t.Errorf("object data[%q] = %q, want %q", k, gotData[k], v)
		}
	}
}

func keys(m map[string]json.RawMessage) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestEncodeFailure(t *testing.T) {
	enc := Encoder{Cluster: "prod"}
	tests := []struct {
		name  string
		spoil func(d *source.Delta)
	}{
		{"object", func(d *source.Delta) { d.Object.Object["bad"] = math.NaN() }},
		{"old object", func(d *source.Delta) {
			d.OldObject = object(configmaps, "team-a", "settings", "uid-1", "41", nil)
			d.OldObject.Object["bad"] = math.Inf(1)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := baseDelta()
			tt.spoil(&d)
			msg, err := enc.Encode(&d)
			if err == nil {
				t.Fatalf("Encode succeeded: %s", msg.Data)
			}
			if msg != nil {
				t.Errorf("Encode returned a message with its error")
			}
			for _, want := range []string{"event: ", "configmaps", "team-a/settings"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not mention %q", err, want)
				}
			}
		})
	}
}

// TestEncodeDataBytes: the data holds each object exactly as
// encoding/json writes it without HTML escaping.
func TestEncodeDataBytes(t *testing.T) {
	enc := Encoder{Cluster: "prod"}
	observed := time.Date(2026, 11, 21, 8, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		name string
		d    source.Delta
	}{
		{"ConfigMap", synthetic.Update(synthetic.ConfigMaps, synthetic.ConfigMap(3), observed)},
		{"Pod", synthetic.Update(synthetic.Pods, synthetic.Pod(3), observed)},
		{"Pod with its old state", func() source.Delta {
			d := synthetic.Update(synthetic.Pods, synthetic.Pod(4), observed)
			d.OldObject = synthetic.Unstructured(synthetic.Pod(5))
			d.OldObject.Object["note"] = "<&> \u2028 \xff"
			return d
		}()},
	} {
		t.Run(tt.name, func(t *testing.T) {
			want := append([]byte(`{"object":`), marshal(t, tt.d.Object.Object)...)
			if tt.d.OldObject != nil {
				want = append(append(want, `,"oldObject":`...), marshal(t, tt.d.OldObject.Object)...)
			}
			want = append(want, '}')
			// Twice: the second encoding reuses the first one's buffer.
			for range 2 {
				msg, err := enc.Encode(&tt.d)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(msg.Data, want) {
					t.Fatalf("Data differs from encoding/json's\n got %s\nwant %s", msg.Data, want)
				}
			}
		})
	}
}

// marshal is what encoding/json writes for v, without HTML escaping and
// without the newline.
func marshal(t *testing.T, v any) []byte {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// A ConfigMap of 400 KB of "<" makes an event of about 400 KB: the
// characters HTML escaping would blow up to six bytes each are written as
// they are.
func TestEncodeDoesNotInflateHTMLCharacters(t *testing.T) {
	const size = 400 << 10
	d := baseDelta()
	d.Object = object(configmaps, "team-a", "settings", "uid-1", "42", map[string]any{"page": strings.Repeat("<", size)})
	msg, err := Encoder{Cluster: "prod"}.Encode(&d)
	if err != nil {
		t.Fatal(err)
	}
	event, err := msg.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("event of a ConfigMap of %d bytes of %q: %d bytes", size, "<", len(event))
	if len(event) > size+1024 {
		t.Errorf("event is %d bytes, want at most %d: the data was inflated", len(event), size+1024)
	}
}

// A delta marked ContentOmitted becomes the same event, marked, with only
// the object's identity as data: no content, no old object.
func TestEncodeContentOmitted(t *testing.T) {
	enc := Encoder{Cluster: "prod"}
	for _, tt := range []struct {
		name string
		d    source.Delta
		want string
	}{
		{"update", func() source.Delta {
			d := baseDelta()
			d.Object.Object["data"] = map[string]any{"page": strings.Repeat("<", 1<<20)}
			d.Object.SetLabels(map[string]string{"app": "web"})
			d.OldObject = object(configmaps, "team-a", "settings", "uid-1", "41", map[string]any{"k": "v1"})
			return d
		}(), `{"object":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"settings","namespace":"team-a","resourceVersion":"42","uid":"uid-1"}}}`},
		{"delete found by a list, cluster-scoped", source.Delta{
			Type: source.Deleted, Resource: clusterroles, Name: "<viewer>", UID: "uid-2", ResourceVersion: "99", Snapshot: true,
			// The object carries the last published state, the delta the
			// list's resourceVersion.
			Object: object(clusterroles, "", "<viewer>", "uid-2", "97", nil),
		}, `{"object":{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRole","metadata":{"name":"<viewer>","resourceVersion":"97","uid":"uid-2"}}}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			full, err := enc.Encode(&tt.d)
			if err != nil {
				t.Fatal(err)
			}
			d := tt.d
			d.ContentOmitted = true
			msg, err := enc.Encode(&d)
			if err != nil {
				t.Fatal(err)
			}
			if !msg.ContentOmitted || full.ContentOmitted {
				t.Errorf("ContentOmitted = %v, and %v for the full event; want true, false", msg.ContentOmitted, full.ContentOmitted)
			}
			if string(msg.Data) != tt.want {
				t.Errorf("Data\n got %.300s\nwant %s", msg.Data, tt.want)
			}
			// Everything else is the full event's: it replaces it.
			msg.Data, full.Data, msg.ContentOmitted = nil, nil, false
			msg.Encoded, full.Encoded = nil, nil
			if !reflect.DeepEqual(msg, full) {
				t.Errorf("attributes differ from the full event's:\n got %+v\nwant %+v", msg, full)
			}
		})
	}
}
