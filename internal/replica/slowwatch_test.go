package replica

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubebus/bridge/internal/replica/cache"
	"github.com/kubebus/bridge/test/natstest"
	"github.com/kubebus/bridge/test/poll"
	"github.com/kubebus/bridge/wire"
)

// A watcher that stops reading is cut and its memory
// released. A real watch over the replica's HTTPS that never reads its
// body, while thousands of changes flow through the cache: the replica
// cuts it (kubebus_replica_watchers_cut_total), the watch is no longer
// served (kubebus_replica_watchers back to 0), and the cache no longer
// feeds a queue for it (kubebus_replica_cache_watchers 0), all while the
// client still reads nothing. The same of an all-clusters watch, cut when
// one of its clusters' watchers is.
func TestSlowWatcherCut(t *testing.T) {
	for _, view := range []string{"one", "*"} {
		t.Run(view, func(t *testing.T) { testSlowWatcherCut(t, view) })
	}
}

func testSlowWatcherCut(t *testing.T, view string) {
	const queue = 64
	srv := natstest.Start(t, natstest.Options{})
	hs, s, bus := testServerConfig(t, srv, func(c *Config) { c.Cache = cache.Options{QueueLength: queue} }, cmDiscovery("one"))
	const objects = 50
	payload := strings.Repeat("x", 8<<10)
	rv := 0
	publish := func(round int) {
		t.Helper()
		var batch []*wire.Message
		for i := range objects {
			rv++
			batch = append(batch, configMapMessage("x", fmt.Sprintf("cm-%d", i), rv, map[string]string{"round": fmt.Sprint(round), "pad": payload}))
		}
		if err := bus.Publish(t.Context(), batch); err != nil {
			t.Fatal(err)
		}
	}
	publish(0)
	poll.Until(t, 30*time.Second, func() (bool, string) {
		code, body := get(t, hs, "/clusters/one/api/v1/namespaces/x/configmaps?limit=1", testToken)
		return code == 200 && strings.Contains(body, `"remainingItemCount":49`), fmt.Sprintf("list: %d %.200s", code, body)
	})

	// The stalled client: it reads the response's headers, never its body.
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, hs.URL+"/clusters/"+view+"/api/v1/namespaces/x/configmaps?watch=1", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	// A client of its own, without the timeout the other requests' share.
	c := &http.Client{Transport: hs.Client().Transport}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("watch: %d", resp.StatusCode)
	}
	cacheWatchers := func() int {
		n := 0
		s.eachStore(func(_ string, _ schema.GroupResource, st *cache.Store) { n += st.Watchers() })
		return n
	}
	poll.Until(t, 10*time.Second, func() (bool, string) {
		return gaugeValue(t, s) == 1 && cacheWatchers() == 1, fmt.Sprintf("watchers %v, cache watchers %d", gaugeValue(t, s), cacheWatchers())
	})

	// Thousands of changes, 8 KiB each: far more than the queue and the
	// connection's buffers hold.
	round := 1
	poll.Until(t, 30*time.Second, func() (bool, string) {
		if round <= 100 {
			publish(round)
			round++
		}
		cut, watching := counterValue(t, s.m.cut), gaugeValue(t, s)
		return cut == 1 && watching == 0 && cacheWatchers() == 0,
			fmt.Sprintf("after %d changes: %v cut, %v watchers served, %d fed by the cache", rv, cut, watching, cacheWatchers())
	})
	t.Logf("cut after at most %d changes of %d KiB, with a queue of %d", rv, len(payload)>>10, queue)
}

func gaugeValue(t *testing.T, s *Server) float64 {
	t.Helper()
	var m dtoMetric
	if err := s.m.watchers.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetGauge().GetValue()
}

// configMapMessage is the bridge's message of ConfigMap ns/name of cluster
// one at rv, with data.
func configMapMessage(ns, name string, rv int, data map[string]string) *wire.Message {
	m := message(configMaps, "ConfigMap", ns, name, rv)
	m.Data = mustJSON(map[string]any{"object": map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"namespace": ns, "name": name, "uid": "uid-" + name, "resourceVersion": fmt.Sprint(rv)},
		"data":     data,
	}})
	m.Action = "updated"
	m.Type = "io.kubebus.object.updated"
	m.ID = fmt.Sprintf("uid-%s-%d-updated", name, rv)
	return m
}
