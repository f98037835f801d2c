package kafka

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kubebus/bridge/consumer"
	sinkkafka "github.com/kubebus/bridge/sink/kafka"
	"github.com/kubebus/bridge/test/bustest"
	"github.com/kubebus/bridge/test/kafkatest"
	"github.com/kubebus/bridge/wire"
)

// clusterSink is a Kafka sink of the bridge for ConfigMaps, writing to
// c with vars on top of the defaults; the end of t closes it.
func clusterSink(t *testing.T, c *kafkatest.Cluster, vars map[string]string) *sinkkafka.Sink {
	t.Helper()
	all := map[string]string{"BRIDGE_KAFKA_BROKERS": strings.Join(c.Addrs(), ",")}
	maps.Copy(all, vars)
	return bustest.KafkaSink(t, all, schema.GroupVersionResource{Version: "v1", Resource: "configmaps"})
}

// uidOf is the uid of ConfigMap default/name of cluster, a UUID (the
// ListerWatcher keeps the text of UUIDs alone, for the objects of the
// deletes it hands out without their last state).
func uidOf(cluster, name string) string {
	return fmt.Sprintf("%08x-0000-0000-0000-%012x", cluster[0], name[0])
}

// change is the bridge's event for ConfigMap default/name of cluster at
// API resourceVersion rv.
func change(cluster, name, action string, rv int) *wire.Message {
	uid := uidOf(cluster, name)
	return &wire.Message{
		ID:              fmt.Sprintf("%s-%d-%s", uid, rv, action),
		Source:          "/clusters/" + cluster + "/api/v1/configmaps",
		Type:            "io.kubebus.object." + action,
		Subject:         "default/" + name,
		Time:            time.Now(),
		Action:          action,
		Resource:        schema.GroupVersionResource{Version: "v1", Resource: "configmaps"},
		ResourceVersion: fmt.Sprint(rv),
		UID:             uid,
		Kind:            "ConfigMap",
		APIVersion:      "v1",
		Namespace:       "default",
		Name:            name,
		Cluster:         cluster,
		Data: fmt.Appendf(nil, `{"object":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":%q,"namespace":"default","uid":%q,"resourceVersion":"%d"}}}`,
			name, uid, rv),
	}
}

// Two clusters' bridges write the same object keys to one history topic.
// An informer of one cluster keeps its objects through the other's deletes
// and their tombstones, in its list and in its watch, and takes its own
// cluster's deletes; a tombstone that names no cluster (written by an
// older bridge) is applied as before.
func TestTombstonesOfAnotherCluster(t *testing.T) {
	for _, mode := range []string{"structured", "binary"} {
		t.Run(mode, func(t *testing.T) {
			c := kafkatest.Start(t)
			s := clusterSink(t, c, map[string]string{
				"BRIDGE_KAFKA_LAYOUT": "history", "BRIDGE_KAFKA_PARTITIONS": "1", "BRIDGE_KAFKA_CE_MODE": mode,
			})
			publish := func(msgs ...*wire.Message) {
				t.Helper()
				for _, m := range msgs {
					if err := s.Publish(t.Context(), []*wire.Message{m}); err != nil {
						t.Fatal(err)
					}
				}
			}
			publish(change("east", "a", "added", 1), change("west", "a", "added", 1), change("west", "a", "deleted", 2))

			lw, err := NewListerWatcher(c.Client(), Config{}, consumer.Options{Cluster: "east", Resource: configmaps})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { lw.Close() })
			got, err := lw.List(metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			list := got.(*unstructured.UnstructuredList)
			var items []string
			for _, it := range list.Items {
				items = append(items, it.GetName()+" "+string(it.GetUID()))
			}
			if want := []string{"a " + uidOf("east", "a")}; !slices.Equal(items, want) {
				t.Fatalf("east lists %v after west deleted its own a; want %v", items, want)
			}

			w, err := lw.Watch(metav1.ListOptions{ResourceVersion: list.GetResourceVersion()})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Stop()
			publish(change("east", "b", "added", 3), change("west", "b", "added", 3), change("west", "b", "deleted", 4),
				change("east", "a", "deleted", 5))
			// One partition: the delete of east's a comes after every
			// record before it.
			if evs, want := events(t, w, "DELETED a"), []string{"ADDED b " + uidOf("east", "b"), "DELETED a " + uidOf("east", "a")}; !slices.Equal(evs, want) {
				t.Fatalf("east's watch: %v; want %v", evs, want)
			}

			// A tombstone without headers, as bridges before this one
			// wrote them: the object of its key is gone.
			produce := c.Client(kgo.DefaultProduceTopic("kube.configmaps"))
			if err := produce.ProduceSync(t.Context(), &kgo.Record{Key: []byte("default/b")}).FirstErr(); err != nil {
				t.Fatal(err)
			}
			if evs, want := events(t, w, "DELETED b"), []string{"DELETED b " + uidOf("east", "b")}; !slices.Equal(evs, want) {
				t.Fatalf("east's watch after a tombstone naming no cluster: %v; want %v", evs, want)
			}
			if st := lw.Stats(); st.Foreign == 0 {
				t.Errorf("stats %+v: want west's records counted as foreign", st)
			}
		})
	}
}

// events reads the events of w up to the first "<TYPE> <name>" that is
// last, and returns them as "<TYPE> <name> <uid>", bookmarks left out.
func events(t *testing.T, w watch.Interface, last string) []string {
	t.Helper()
	var out []string
	deadline := time.After(30 * time.Second)
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("watch ended after %v", out)
			}
			if ev.Type == watch.Bookmark {
				continue
			}
			u, ok := ev.Object.(*unstructured.Unstructured)
			if !ok {
				t.Fatalf("event %s of %T after %v", ev.Type, ev.Object, out)
			}
			out = append(out, fmt.Sprintf("%s %s %s", ev.Type, u.GetName(), u.GetUID()))
			if fmt.Sprintf("%s %s", ev.Type, u.GetName()) == last {
				return out
			}
		case <-deadline:
			t.Fatalf("no %s within 30s; events %v", last, out)
		}
	}
}
