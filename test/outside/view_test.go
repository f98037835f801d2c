package outside

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubebus/bridge/checkpoint"
	"github.com/kubebus/bridge/source"
	"github.com/kubebus/bridge/test/controlplane"
	"github.com/kubebus/bridge/test/poll"
)

// keepView is a source.View written outside the module: a ConfigMap is in
// it while its data.keep is "yes", and what is published of it is its
// identity and data.keep, nothing else.
type keepView struct{}

var _ source.View = keepView{}

// keepDefinition names the view's definition in the states it records.
const keepDefinition = "keep-v1"

func (keepView) Apply(_ source.Resource, obj *source.RawObject) source.ViewResult {
	var cm struct {
		APIVersion string            `json:"apiVersion"`
		Kind       string            `json:"kind"`
		Metadata   map[string]any    `json:"metadata"`
		Data       map[string]string `json:"data"`
	}
	if err := json.Unmarshal(obj.Data(), &cm); err != nil || cm.Data["keep"] != "yes" {
		return source.ViewResult{}
	}
	m := obj.Meta()
	b, err := json.Marshal(map[string]any{
		"apiVersion": cm.APIVersion, "kind": cm.Kind,
		"metadata": map[string]any{"namespace": m.Namespace, "name": m.Name, "uid": m.UID, "resourceVersion": m.ResourceVersion},
		"data":     map[string]string{"keep": "yes"},
	})
	if err != nil {
		return source.ViewResult{}
	}
	projected, err := source.NewRawObject(b)
	if err != nil {
		return source.ViewResult{}
	}
	h := fnv.New64a()
	h.Write([]byte(m.UID))
	return source.ViewResult{In: true, Object: projected, State: fmt.Sprintf("%s.%x", keepDefinition, h.Sum64())}
}

func (keepView) Current(state string) bool { return strings.HasPrefix(state, keepDefinition+".") }

func (keepView) Unchanged(prev, next string) bool { return prev == next }

// deltas collects what a source hands on.
type deltas struct {
	mu  sync.Mutex
	got []source.Delta
}

func (d *deltas) OnDelta(delta source.Delta) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.got = append(d.got, delta)
}

// find returns the delta of typ for the object name, if one came.
func (d *deltas) find(typ source.DeltaType, name string) (source.Delta, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, delta := range d.got {
		if delta.Type == typ && delta.Name == name {
			return delta, true
		}
	}
	return source.Delta{}, false
}

// A View written outside the module filters and projects what a source
// watching a real API server hands on.
func TestViewOutsideTheModule(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cp, err := controlplane.Start(ctx, controlplane.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cp.Stop(); err != nil {
			t.Error(err)
		}
	})
	rc := rest.CopyConfig(cp.RESTConfig())
	rc.WrapTransport = source.WrapTransport
	kc, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	const ns = "outside"
	if _, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cms := kc.CoreV1().ConfigMaps(ns)
	for name, keep := range map[string]string{"kept": "yes", "dropped": "no"} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"keep": keep, "noise": "n"}}
		if _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	dc, err := dynamic.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	restClient, err := source.NewRESTClient(rc)
	if err != nil {
		t.Fatal(err)
	}
	configmaps := source.Resource{GroupVersionResource: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Kind: "ConfigMap", Namespaced: true}
	got := &deltas{}
	src := source.New(dc, source.Options{Resources: []source.Resource{configmaps}, Namespaces: []string{ns}, REST: restClient, View: keepView{}},
		checkpoint.Discard(), got, slog.New(slog.NewTextHandler(t.Output(), nil)))
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- src.Run(runCtx) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("source: %v", err)
		}
	}()
	select {
	case <-src.Synced():
	case err := <-done:
		t.Fatalf("source stopped before it synced: %v", err)
	case <-ctx.Done():
		t.Fatal("source not synced")
	}

	added, ok := got.find(source.Added, "kept")
	if !ok || added.Raw == nil {
		t.Fatalf("no added delta of the ConfigMap in the view, with its raw object: %+v", got.got)
	}
	if data := string(added.Raw.Data()); strings.Contains(data, "noise") || !strings.Contains(data, `"keep":"yes"`) {
		t.Errorf("published %s, want the projection", data)
	}
	if m := added.Raw.Meta(); m.Name != "kept" || m.Namespace != ns || m.UID != string(added.UID) {
		t.Errorf("the projection's identity %+v", m)
	}
	if _, ok := got.find(source.Added, "dropped"); ok {
		t.Error("the ConfigMap out of the view was handed on")
	}

	// Leaving the view is a delete.
	cm, err := cms.Get(ctx, "kept", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data["keep"] = "no"
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 30*time.Second, func() (bool, string) {
		d, ok := got.find(source.Deleted, "kept")
		return ok && d.Reason == source.ReasonLeftFilter, "no delete of the ConfigMap that left the view yet"
	})
}
