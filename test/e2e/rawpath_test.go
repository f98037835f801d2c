package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/kubebus/bridge/internal/rawobject"
	"github.com/kubebus/bridge/sink/sinktest"
	"github.com/kubebus/bridge/source"
	"github.com/kubebus/bridge/test/poll"
	"github.com/kubebus/bridge/wire"
)

// By default the bridge hands on each object as the API server sent it:
// the event's data.object is, byte for byte, the object a GET returns
// (metadata.managedFields left out, or kept with
// BRIDGE_KEEP_MANAGED_FIELDS; <, > and & written as characters, where the
// API server escapes them), for ConfigMaps, a namespaced CRD whose
// objects hold unicode, escapes, large numbers and empty maps and lists,
// and a cluster-scoped CRD; listed before the start (the initial list) or
// created and changed after it (watch events).
func TestRawPathHandsOnTheAPIServersBytes(t *testing.T) {
	widgets := createCRD(t, "rawwidgets", "RawWidget", "Namespaced")
	gadgets := createCRD(t, "rawgadgets", "RawGadget", "Cluster")
	rc, err := source.NewRESTClient(cp.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cp.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	for _, keep := range []bool{false, true} {
		t.Run(fmt.Sprintf("keepManagedFields=%v", keep), func(t *testing.T) {
			ctx := t.Context()
			ns := namespace(t, "raw")
			cms := kube(t).CoreV1().ConfigMaps(ns)
			mustCM := func(cm *corev1.ConfigMap, err error) *corev1.ConfigMap {
				t.Helper()
				if err != nil {
					t.Fatal(err)
				}
				return cm
			}
			mustU := func(u *unstructured.Unstructured, err error) *unstructured.Unstructured {
				t.Helper()
				if err != nil {
					t.Fatal(err)
				}
				return u
			}
			cm1 := mustCM(cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "listed", Labels: map[string]string{"a": "b"}},
				Data: map[string]string{"text": "café \"quoted\" <tag> & \\ \u2028 😀", "empty": ""}}, metav1.CreateOptions{}))
			w1 := mustU(dyn.Resource(widgets).Namespace(ns).Create(ctx, &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "example.com/v1alpha1", "kind": "RawWidget", "metadata": map[string]any{"name": "w1"},
				"spec": map[string]any{
					"unicode": "日本語 ✓ \u00e9", "escapes": "tab\tnewline\n\"\\/ <b> & \\u003c \u2028", "big": int64(9007199254740993), "neg": int64(-9223372036854775808),
					"float": 1.5e-7, "emptyMap": map[string]any{}, "emptyList": []any{}, "nested": map[string]any{"a": []any{map[string]any{}, []any{}}},
				},
			}}, metav1.CreateOptions{}))

			env := map[string]string{
				"BRIDGE_RESOURCES":  "configmaps,rawwidgets.example.com,rawgadgets.example.com",
				"BRIDGE_NAMESPACES": ns,
			}
			if keep {
				env["BRIDGE_KEEP_MANAGED_FIELDS"] = "true"
			}
			s := &sinktest.Recorder{}
			b := startBridge(t, env, s)

			cm2 := mustCM(cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "watched"},
				Data: map[string]string{"k": "v"}}, metav1.CreateOptions{}))
			g1 := mustU(dyn.Resource(gadgets).Create(ctx, &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "example.com/v1alpha1", "kind": "RawGadget", "metadata": map[string]any{"name": "g-" + ns},
				"spec": map[string]any{"x": 1},
			}}, metav1.CreateOptions{}))
			cm1.Data["text"] = "changed"
			cm1 = mustCM(cms.Update(ctx, cm1, metav1.UpdateOptions{}))

			type object struct {
				gvr      schema.GroupVersionResource
				ns, name string
				rv       string
			}
			cmGVR := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
			want := []object{
				{cmGVR, ns, "listed", cm1.ResourceVersion},
				{widgets, ns, "w1", w1.GetResourceVersion()},
				{cmGVR, ns, "watched", cm2.ResourceVersion},
				{gadgets, "", g1.GetName(), g1.GetResourceVersion()},
			}
			find := func(o object) *wire.Message {
				for _, m := range s.Accepted() {
					if m.Resource == o.gvr && m.Namespace == o.ns && m.Name == o.name && m.ResourceVersion == o.rv {
						return m
					}
				}
				return nil
			}
			poll.Until(t, 30*time.Second, func() (bool, string) {
				for _, o := range want {
					if find(o) == nil {
						return false, fmt.Sprintf("no event for %s %s/%s at %s", o.gvr.Resource, o.ns, o.name, o.rv)
					}
				}
				return true, ""
			})
			b.stop(t)

			for _, o := range want {
				path := "/api/v1"
				if o.gvr.Group != "" {
					path = "/apis/" + o.gvr.Group + "/" + o.gvr.Version
				}
				if o.ns != "" {
					path += "/namespaces/" + o.ns
				}
				path += "/" + o.gvr.Resource + "/" + o.name
				got, err := rc.Get().AbsPath(path).SetHeader("Accept", "application/json").Do(ctx).Raw()
				if err != nil {
					t.Fatalf("GET %s: %v", path, err)
				}
				// The API server's encoder ends its answer with a newline.
				got = bytes.TrimSpace(got)
				if !keep {
					if got, err = rawobject.AppendCut(nil, got); err != nil {
						t.Fatal(err)
					}
				}
				got = rawobject.AppendUnescapedHTML(nil, got)
				var data struct {
					Object json.RawMessage `json:"object"`
				}
				if err := json.Unmarshal(find(o).Data, &data); err != nil {
					t.Fatal(err)
				}
				if string(data.Object) != string(got) {
					t.Errorf("%s: the event's object is not the bytes the API server sends:\n got %s\nwant %s", path, data.Object, got)
				}
			}
		})
	}
}
