package consumer

import (
	"context"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
)

// next reads the next event of w, failing after 5 s.
func next(t *testing.T, w watch.Interface) watch.Event {
	t.Helper()
	select {
	case ev, ok := <-w.ResultChan():
		if !ok {
			t.Fatal("watch ended")
		}
		return ev
	case <-time.After(5 * time.Second):
		t.Fatal("no event")
	}
	return watch.Event{}
}

// TestListThenWatch: list items and watch events carry bus positions as
// resourceVersions and the API server's in the annotation; progress
// records become bookmarks; a watch from any other position is 410.
func TestListThenWatch(t *testing.T) {
	log := newFakeLog()
	a1 := cm("a", "a", 10)
	log.append(rec("added", a1))
	lw := newLW(t, log, testOptions())
	got, err := lw.List(metav1.ListOptions{ResourceVersion: "0", Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	list := got.(*unstructured.UnstructuredList)
	if list.GetResourceVersion() != "p1" || len(list.Items) != 1 || list.GetKind() != "ConfigMapList" {
		t.Fatalf("list %s kind %s with %d items, want p1 ConfigMapList with 1", list.GetResourceVersion(), list.GetKind(), len(list.Items))
	}
	if it := list.Items[0]; it.GetResourceVersion() != "p1" || it.GetAnnotations()[AnnotationResourceVersion] != "10" {
		t.Errorf("item resourceVersion %s annotation %v, want p1 and 10", it.GetResourceVersion(), it.GetAnnotations())
	}

	w, err := lw.Watch(metav1.ListOptions{ResourceVersion: "p1", AllowWatchBookmarks: true})
	if err != nil {
		t.Fatal(err)
	}
	if ev := next(t, w); ev.Type != watch.Bookmark || ev.Object.(*unstructured.Unstructured).GetResourceVersion() != "p1" ||
		ev.Object.(*unstructured.Unstructured).GetKind() != "ConfigMap" {
		t.Errorf("first event %s %v, want a ConfigMap bookmark at p1", ev.Type, ev.Object)
	}
	a2 := cm("a", "a", 11)
	log.append(rec("updated", a2))
	ev := next(t, w)
	u := ev.Object.(*unstructured.Unstructured)
	if ev.Type != watch.Modified || u.GetResourceVersion() != "p2" || u.GetAnnotations()[AnnotationResourceVersion] != "11" {
		t.Errorf("event %s at %s (API %s), want MODIFIED at p2 (API 11)", ev.Type, u.GetResourceVersion(), u.GetAnnotations()[AnnotationResourceVersion])
	}
	w.Stop()

	w, err = lw.Watch(metav1.ListOptions{ResourceVersion: "p1"})
	if err != nil {
		t.Fatal(err)
	}
	ev = next(t, w)
	if status, ok := ev.Object.(*metav1.Status); ev.Type != watch.Error || !ok || !apierrors.IsResourceExpired(apierrors.FromObject(status)) {
		t.Errorf("watch from an old position: %s %v, want a 410 Expired error", ev.Type, ev.Object)
	}
	if st := lw.Stats(); st.Expired != 1 {
		t.Errorf("stats %+v: want 1 expired", st)
	}
}

// TestWatchTimeout: a watch ends cleanly when its TimeoutSeconds pass.
func TestWatchTimeout(t *testing.T) {
	log := newFakeLog()
	log.append(rec("added", cm("a", "a", 10)))
	lw := newLW(t, log, testOptions())
	if _, err := lw.List(metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	one := int64(1)
	start := time.Now()
	w, err := lw.WatchWithContext(context.Background(), metav1.ListOptions{ResourceVersion: "p1", TimeoutSeconds: &one})
	if err != nil {
		t.Fatal(err)
	}
	for ev := range w.ResultChan() {
		t.Errorf("unexpected event %s", ev.Type)
	}
	if d := time.Since(start); d < time.Second || d > 5*time.Second {
		t.Errorf("watch lasted %s, want about 1s", d)
	}
}

// TestMetricsShared: two ListerWatchers on one Registerer share the
// metrics, told apart by their informer label.
func TestMetricsShared(t *testing.T) {
	reg := prometheus.NewRegistry()
	log := newFakeLog()
	log.append(rec("added", cm("a", "a", 10)), rec("added", cm("a", "a", 10)))
	for _, name := range []string{"one", "two"} {
		opts := testOptions()
		opts.Name, opts.Registerer = name, reg
		lw := newLW(t, log, opts)
		if _, err := lw.List(metav1.ListOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "kubebus_consumer_lists_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			var l []string
			for _, lp := range m.GetLabel() {
				l = append(l, lp.GetName()+"="+lp.GetValue())
			}
			got[strings.Join(l, ",")] = m.GetCounter().GetValue()
		}
	}
	want := map[string]float64{"from=bus,informer=one": 1, "from=bus,informer=two": 1}
	if !maps.Equal(got, want) {
		t.Errorf("kubebus_consumer_lists_total %v, want %v", got, want)
	}
}

func TestOptionsErrors(t *testing.T) {
	_, err := NewListerWatcher(newFakeLog(), Options{})
	if err == nil || !strings.Contains(err.Error(), "Options.Cluster") || !strings.Contains(err.Error(), "Options.Resource") {
		t.Errorf("error %v, want both Options.Cluster and Options.Resource named", err)
	}
}
