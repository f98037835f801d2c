package e2e

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/kubebus/bridge/consumer"
	kafkaconsumer "github.com/kubebus/bridge/consumer/kafka"
	natsconsumer "github.com/kubebus/bridge/consumer/nats"
	"github.com/kubebus/bridge/test/corpus"
	"github.com/kubebus/bridge/test/poll"
	"github.com/kubebus/bridge/wire"
)

// TestDiscoveryDocument: a bridge watching ConfigMaps and, by a pattern,
// a group of CRDs publishes its cluster's discovery document, which a
// DiscoveryLog reads: the kinds, scopes and short names discovery shows,
// and the CRD's printer columns. A CRD created in the group yields a new
// document with its resource, and its deletion one without; a
// DiscoveryLog started then reads the latest document first.
func TestDiscoveryDocument(t *testing.T) {
	forEachBusWith(t, busOptions{natsLayout: "state"}, func(t *testing.T, b bus) {
		ns := namespace(t, "disc")
		group := "disc-" + b.name() + ".example.com"
		widgets := createCRDWithColumns(t, group, "widgets", "Widget", []string{"wd"})
		env := stateEnv(b, ns)
		env["BRIDGE_RESOURCES"] = "configmaps,*." + group
		r := startBridge(t, env, nil)

		docs := followDiscovery(t, b, ns)
		doc := docs.until(t, "the first document", func(d wire.Discovery) bool { return hasResource(d, widgets) })
		if doc.Server != cp.RESTConfig().Host {
			t.Errorf("server %q, want the bridge's API server %q", doc.Server, cp.RESTConfig().Host)
		}
		cm, ok := findResource(doc, schema.GroupVersionResource{Version: "v1", Resource: "configmaps"})
		if !ok || cm.Kind != "ConfigMap" || !cm.Namespaced || cm.Singular != "configmap" || !slices.Contains(cm.ShortNames, "cm") || len(cm.Columns) != 0 {
			t.Errorf("configmaps: %+v (found %t), want kind ConfigMap, namespaced, singular configmap, short name cm, no columns", cm, ok)
		}
		w, _ := findResource(doc, widgets)
		wantCols := []wire.PrinterColumn{
			{Name: "Size", Type: "integer", JSONPath: ".spec.size", Description: "how big"},
			{Name: "Colour", Type: "string", JSONPath: ".spec.colour", Priority: 1},
		}
		if w.Kind != "Widget" || !w.Namespaced || w.Singular != "widget" || !slices.Equal(w.ShortNames, []string{"wd"}) || !slices.Equal(w.Columns, wantCols) {
			t.Errorf("widgets: %+v, want kind Widget, namespaced, singular widget, short name wd, columns %+v", w, wantCols)
		}
		if len(doc.Resources) != 2 {
			t.Errorf("%d resources in the document, want configmaps and widgets: %+v", len(doc.Resources), doc.Resources)
		}

		gadgets := createCRDWithColumns(t, group, "gadgets", "Gadget", nil)
		docs.until(t, "a document with gadgets", func(d wire.Discovery) bool { return hasResource(d, gadgets) && hasResource(d, widgets) })
		deleteCRD(t.Context(), t, gadgets.Resource+"."+gadgets.Group)
		latest := docs.until(t, "a document without gadgets", func(d wire.Discovery) bool { return !hasResource(d, gadgets) && hasResource(d, widgets) })

		// A reader that comes later reads the latest document first.
		again := followDiscovery(t, b, ns)
		first := again.until(t, "the latest document, read afresh", func(wire.Discovery) bool { return true })
		if hasResource(first, gadgets) || !first.Time.Equal(latest.Time) {
			t.Errorf("a new reader read first the document of %s (with gadgets: %t), want the latest, of %s", first.Time, hasResource(first, gadgets), latest.Time)
		}
		if n := docs.count(); n > 4 {
			t.Errorf("%d documents for a start, a CRD created and deleted: the bridge published documents that did not change", n)
		}

		// A restart with nothing changed publishes nothing again: once the
		// new leader has compared the document with the bus's, the bus's
		// position of it has not moved.
		r.stop(t)
		before := discoveryPosition(t, b, ns)
		restarted := startBridge(t, env, nil)
		poll.Until(t, 30*time.Second, func() (bool, string) {
			logs := restarted.logs.String()
			return strings.Contains(logs, unchangedLog) || strings.Contains(logs, "published the discovery document"),
				"the restarted bridge's publisher has not compared its document with the bus's"
		})
		restarted.stop(t)
		if after := discoveryPosition(t, b, ns); after != before {
			t.Errorf("a restart with nothing changed moved the discovery document's position from %s to %s, want no document published", before, after)
		}
	})
}

// unchangedLog is what the publisher logs when the bus holds its document
// already.
const unchangedLog = "the bus holds the cluster's discovery document already"

// discoveryPosition is where the bus is in the discovery documents of the
// cluster "e2e": the sequence of the subject's last message (NATS), the
// topic's end offsets (Kafka).
func discoveryPosition(t *testing.T, b bus, ns string) string {
	t.Helper()
	switch b := b.(type) {
	case *natsBus:
		st, err := b.srv.JetStream(t).Stream(t.Context(), "KUBE")
		if err != nil {
			t.Fatal(err)
		}
		m, err := st.GetLastMsgForSubject(t.Context(), wire.DiscoverySubject("kube", "e2e"))
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("sequence %d", m.Sequence)
	case *kafkaBus:
		return fmt.Sprintf("end offsets %v", b.c.EndOffsets(wire.DiscoveryTopic("kube-"+ns)))
	}
	t.Fatalf("no discovery position for bus %T", b)
	return ""
}

// discoveryDocs collects what a DiscoveryLog's Follow passes on.
type discoveryDocs struct {
	mu   sync.Mutex
	docs []wire.Discovery
	// next is the first document until looks at.
	next int
}

func (d *discoveryDocs) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.docs)
}

// until waits for a document of the cluster "e2e", after the one
// until returned last, that ok accepts, and returns the first such one.
func (d *discoveryDocs) until(t *testing.T, what string, ok func(wire.Discovery) bool) wire.Discovery {
	t.Helper()
	var got wire.Discovery
	poll.Until(t, 30*time.Second, func() (bool, string) {
		d.mu.Lock()
		defer d.mu.Unlock()
		for ; d.next < len(d.docs); d.next++ {
			if doc := d.docs[d.next]; doc.Cluster == "e2e" && ok(doc) {
				got = doc
				d.next++
				return true, ""
			}
		}
		return false, fmt.Sprintf("%s: not among %d documents read", what, len(d.docs))
	})
	return got
}

// followDiscovery follows the discovery documents on b, as the bridge of
// stateEnv(b, ns) writes them, until the test ends.
func followDiscovery(t *testing.T, b bus, ns string) *discoveryDocs {
	t.Helper()
	log := slog.New(slog.NewTextHandler(t.Output(), nil)).With("component", "discovery reader")
	var dl consumer.DiscoveryLog
	var err error
	switch b := b.(type) {
	case *natsBus:
		dl, err = natsconsumer.NewDiscoveryLog(b.srv.JetStream(t), natsconsumer.Config{}, log)
	case *kafkaBus:
		dl, err = kafkaconsumer.NewDiscoveryLog(b.c.Client(), kafkaconsumer.Config{TopicPrefix: "kube-" + ns}, log)
	default:
		t.Fatalf("no discovery log for bus %T", b)
	}
	if err != nil {
		t.Fatal(err)
	}
	docs := &discoveryDocs{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- dl.Follow(ctx, func(d wire.Discovery) error {
			docs.mu.Lock()
			docs.docs = append(docs.docs, d)
			docs.mu.Unlock()
			return nil
		})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != context.Canceled {
			t.Errorf("Follow ended with %v, want context.Canceled", err)
		}
	})
	return docs
}

func findResource(d wire.Discovery, gvr schema.GroupVersionResource) (wire.DiscoveredResource, bool) {
	for _, r := range d.Resources {
		if r.GroupVersionResource() == gvr {
			return r, true
		}
	}
	return wire.DiscoveredResource{}, false
}

func hasResource(d wire.Discovery, gvr schema.GroupVersionResource) bool {
	_, ok := findResource(d, gvr)
	return ok
}

// createCRDWithColumns defines <plural>.<group> at v1, namespaced, with
// two printer columns (Size, and Colour of priority 1) and shortNames,
// and waits until discovery serves it. It is deleted when the test ends.
func createCRDWithColumns(t *testing.T, group, plural, kind string, shortNames []string) schema.GroupVersionResource {
	t.Helper()
	gvr := schema.GroupVersionResource{Group: group, Version: "v1", Resource: plural}
	crd := corpus.CRD(gvr, kind, "Namespaced", nil)
	versions := crd.Object["spec"].(map[string]any)["versions"].([]any)
	versions[0].(map[string]any)["additionalPrinterColumns"] = []any{
		map[string]any{"name": "Size", "type": "integer", "jsonPath": ".spec.size", "description": "how big"},
		map[string]any{"name": "Colour", "type": "string", "jsonPath": ".spec.colour", "priority": int64(1)},
	}
	if len(shortNames) > 0 {
		names := crd.Object["spec"].(map[string]any)["names"].(map[string]any)
		var sn []any
		for _, s := range shortNames {
			sn = append(sn, s)
		}
		names["shortNames"] = sn
	}
	dyn := discoveryDyn(t)
	if _, err := dyn.Resource(corpus.CRDResource).Create(t.Context(), crd, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create CRD %s: %v", crd.GetName(), err)
	}
	t.Cleanup(func() {
		_ = dyn.Resource(corpus.CRDResource).Delete(context.Background(), crd.GetName(), metav1.DeleteOptions{})
	})
	return gvr
}

func discoveryDyn(t *testing.T) dynamic.Interface {
	t.Helper()
	dyn, err := dynamic.NewForConfig(cp.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	return dyn
}
