package replica

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubebus/bridge/test/bustest"
	"github.com/kubebus/bridge/test/natstest"
	"github.com/kubebus/bridge/test/poll"
	"github.com/kubebus/bridge/wire"
)

var (
	configMaps = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	nodes      = schema.GroupVersionResource{Version: "v1", Resource: "nodes"}
)

// oneWithNodes is cluster one publishing configmaps and the
// cluster-scoped nodes.
func oneWithNodes() wire.Discovery {
	d := cmDiscovery("one")
	d.Resources = append(d.Resources, wire.DiscoveredResource{Version: "v1", Resource: "nodes", Kind: "Node", Singular: "node"})
	return d
}

// message is the bridge's message adding the object ns/name of res.
func message(res schema.GroupVersionResource, kind, ns, name string, rv int) *wire.Message {
	meta := map[string]any{"name": name, "uid": "uid-" + name, "resourceVersion": fmt.Sprint(rv)}
	if ns != "" {
		meta["namespace"] = ns
	}
	data, _ := json.Marshal(map[string]any{"object": map[string]any{"apiVersion": "v1", "kind": kind, "metadata": meta}})
	m := bustest.Object{Cluster: "one", Resource: res, Kind: kind, Namespace: ns, Name: name}.Message("added", rv, data)
	if ns == "" {
		m.Subject = name
	}
	return m
}

// names lists the names of a list's items.
func names(t *testing.T, body string) []string {
	t.Helper()
	var l struct {
		Items []struct {
			Metadata struct{ Name string }
		}
	}
	if err := json.Unmarshal([]byte(body), &l); err != nil {
		t.Fatalf("list: %v: %s", err, body)
	}
	var out []string
	for _, it := range l.Items {
		out = append(out, it.Metadata.Name)
	}
	return out
}

// The access package requires of the server: only clusters on the bus in
// the context (an unknown cluster tells nobody without a grant on it that
// it is unknown), a cluster-scoped resource under a namespace is 404, a
// list or watch serves exactly the name of its metadata.name field
// selector, and denials are counted by bounded labels.
func TestAccessRequirements(t *testing.T) {
	srv := natstest.Start(t, natstest.Options{})
	hs, s, bus := testServerWith(t, srv, oneWithNodes())
	if err := bus.Publish(t.Context(), []*wire.Message{
		message(configMaps, "ConfigMap", "x", "a", 1),
		message(configMaps, "ConfigMap", "x", "b", 2),
		message(nodes, "Node", "", "n", 3),
	}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 30*time.Second, func() (bool, string) {
		code, body := get(t, hs, "/clusters/one/api/v1/configmaps", testToken)
		return code == 200 && strings.Join(names(t, body), ",") == "a,b", fmt.Sprintf("configmaps: %d %s", code, body)
	})
	poll.Until(t, 30*time.Second, func() (bool, string) {
		code, body := get(t, hs, "/clusters/one/api/v1/nodes/n", testToken)
		return code == 200, fmt.Sprintf("node n: %d %s", code, body)
	})

	cases := []struct {
		name, path, token string
		code              int
		says              string
	}{
		// Unknown clusters.
		{"unknown cluster, grant on every cluster", "/clusters/two/api/v1/configmaps", testToken, 404, `is not on the bus`},
		{"unknown cluster, grant on another cluster", "/clusters/two/api/v1/configmaps", "reader-token", 403, "forbidden"},
		{"unknown cluster, no grant", "/clusters/two/api", "bob-token", 403, "forbidden"},
		{"known cluster, no grant", "/clusters/one/api", "bob-token", 403, "forbidden"},
		// A cluster-scoped resource under a namespace.
		{"node", "/clusters/one/api/v1/nodes/n", testToken, 200, `"name":"n"`},
		{"node under a namespace", "/clusters/one/api/v1/namespaces/x/nodes/n", testToken, 404, "cluster-scoped"},
		{"nodes under a namespace", "/clusters/one/api/v1/namespaces/x/nodes", testToken, 404, "cluster-scoped"},
		{"nodes watched under a namespace", "/clusters/one/api/v1/namespaces/x/nodes?watch=1", testToken, 404, "cluster-scoped"},
		// A rule for one name.
		{"named: list without the selector", "/clusters/one/api/v1/namespaces/x/configmaps", "named-token", 403, "forbidden"},
		{"named: list of another name", "/clusters/one/api/v1/namespaces/x/configmaps?fieldSelector=metadata.name%3Db", "named-token", 403, "forbidden"},
		{"named: get of another name", "/clusters/one/api/v1/namespaces/x/configmaps/b", "named-token", 403, "forbidden"},
		{"named: get", "/clusters/one/api/v1/namespaces/x/configmaps/a", "named-token", 200, `"name":"a"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, body := get(t, hs, c.path, c.token)
			if code != c.code || !strings.Contains(body, c.says) {
				t.Errorf("GET %s: %d %s; want %d saying %q", c.path, code, body, c.code, c.says)
			}
		})
	}

	// A list with the name's selector serves that object alone, whatever
	// else the selector says.
	for _, q := range []string{"metadata.name%3Da", "metadata.name%3D%3Da", "metadata.name%3Da,metadata.namespace%3Dx"} {
		code, body := get(t, hs, "/clusters/one/api/v1/namespaces/x/configmaps?fieldSelector="+q, "named-token")
		if code != 200 || strings.Join(names(t, body), ",") != "a" {
			t.Errorf("named: list with %s: %d %s; want a alone", q, code, body)
		}
	}
	// A watch too: its initial events hold a alone.
	code, body := get(t, hs, "/clusters/one/api/v1/namespaces/x/configmaps?watch=1&timeoutSeconds=1&fieldSelector=metadata.name%3Da", "named-token")
	if code != 200 || !strings.Contains(body, `"name":"a"`) || strings.Contains(body, `"name":"b"`) {
		t.Errorf("named: watch: %d %s; want ADDED a alone", code, body)
	}

	// The legacy /watch/ path is authorized as a watch, and served as
	// one: a user who may only watch gets events, never a list.
	code, body = get(t, hs, "/clusters/one/api/v1/watch/namespaces/x/configmaps?timeoutSeconds=1", "watcher-token")
	if code != 200 || !strings.Contains(body, `"type":"ADDED"`) || strings.Contains(body, `"kind":"ConfigMapList"`) {
		t.Errorf("watcher: /watch/ path: %d %s; want a watch's events", code, body)
	}
	if code, _ := get(t, hs, "/clusters/one/api/v1/namespaces/x/configmaps", "watcher-token"); code != 403 {
		t.Errorf("watcher: list: %d, want 403", code)
	}

	// Denials are counted by cluster and resource, bounded by the bus:
	// an unknown cluster and a resource no cluster publishes are "other".
	before := counterValue(t, s.m.denials.WithLabelValues("other", "other"))
	get(t, hs, "/clusters/no-such-cluster/api/v1/widgets", "bob-token")
	get(t, hs, "/clusters/one/api/v1/widgets", "bob-token")
	if got := counterValue(t, s.m.denials.WithLabelValues("other", "other")); got != before+1 {
		t.Errorf("denials{cluster=other,resource=other}: %v, want %v", got, before+1)
	}
	if got := counterValue(t, s.m.denials.WithLabelValues("one", "other")); got < 1 {
		t.Errorf("denials{cluster=one,resource=other}: %v, want at least 1", got)
	}
	if got := counterValue(t, s.m.denials.WithLabelValues("one", "configmaps")); got < 1 {
		t.Errorf("denials{cluster=one,resource=configmaps}: %v, want at least 1 (named's lists)", got)
	}
	if n := seriesCount(s.m.denials); n > 6 {
		t.Errorf("%d denial series; want them bounded by the bus's clusters and resources", n)
	}
}

func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

func seriesCount(c prometheus.Collector) int {
	ch := make(chan prometheus.Metric)
	go func() { c.Collect(ch); close(ch) }()
	n := 0
	for range ch {
		n++
	}
	return n
}

type dtoMetric = dto.Metric

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// The all-clusters discovery is the union of the clusters the identity
// may read, not of the bus: it tells nobody of a resource, or a group,
// only a cluster beyond their grants publishes.
func TestAllClustersDiscoveryScope(t *testing.T) {
	srv := natstest.Start(t, natstest.Options{})
	two := cmDiscovery("two")
	two.Resources = append(two.Resources, wire.DiscoveredResource{Group: "example.com", Version: "v1", Resource: "widgets", Kind: "Widget", Singular: "widget", Namespaced: true})
	hs := testServer(t, srv, cmDiscovery("one"), two)
	for _, c := range []struct {
		name, path, token string
		code              int
		widgets           bool
	}{
		{"alice: groups", "/clusters/*/apis", testToken, 200, true},
		{"alice: group version", "/clusters/*/apis/example.com/v1", testToken, 200, true},
		{"reader: groups", "/clusters/*/apis", "reader-token", 200, false},
		{"reader: group", "/clusters/*/apis/example.com", "reader-token", 404, false},
		{"reader: group version", "/clusters/*/apis/example.com/v1", "reader-token", 404, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, body := get(t, hs, c.path, c.token)
			if code != c.code || strings.Contains(body, `"groupVersion":"example.com/v1"`) != c.widgets {
				t.Errorf("GET %s: %d %s; want %d, example.com shown %v", c.path, code, body, c.code, c.widgets)
			}
		})
	}
}
