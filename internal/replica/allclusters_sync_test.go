package replica

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	clientcache "k8s.io/client-go/tools/cache"

	"github.com/kubebus/bridge/test/natstest"
	"github.com/kubebus/bridge/test/poll"
	"github.com/kubebus/bridge/wire"
)

// neverSyncs is the ListerWatcher of a cluster whose list never ends.
type neverSyncs struct{ stop <-chan struct{} }

func (n neverSyncs) List(metav1.ListOptions) (runtime.Object, error) {
	<-n.stop
	return nil, fmt.Errorf("test: stopped")
}

func (n neverSyncs) Watch(metav1.ListOptions) (watch.Interface, error) {
	<-n.stop
	return nil, fmt.Errorf("test: stopped")
}

// A cluster whose cache never syncs is left out of the all-clusters view,
// with a warning naming it, after one deadline for every cluster (the
// caches start together): it does not fail the view, nor make each
// cluster wait in turn.
func TestAllClustersLeavesOutUnsynced(t *testing.T) {
	srv := natstest.Start(t, natstest.Options{})
	stop := make(chan struct{})
	const syncTimeout = time.Second
	hs, _, bus := testServerConfig(t, srv, func(c *Config) {
		real := c.NewListerWatcher
		c.SyncTimeout = syncTimeout
		c.NewListerWatcher = func(cluster string, gr schema.GroupResource) (clientcache.ListerWatcher, error) {
			if strings.HasPrefix(cluster, "stuck") {
				return neverSyncs{stop}, nil
			}
			return real(cluster, gr)
		}
	}, cmDiscovery("one"), cmDiscovery("stuck-a"), cmDiscovery("stuck-b"))
	t.Cleanup(func() { close(stop) }) // before the server stops, which waits for its caches
	if err := bus.Publish(t.Context(), []*wire.Message{message(configMaps, "ConfigMap", "x", "a", 1)}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 30*time.Second, func() (bool, string) {
		code, body := get(t, hs, "/clusters/one/api/v1/configmaps", testToken)
		return code == 200 && strings.Join(names(t, body), ",") == "a", fmt.Sprintf("cluster one: %d %s", code, body)
	})

	req, _ := http.NewRequest(http.MethodGet, hs.URL+"/clusters/*/api/v1/configmaps", nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	start := time.Now()
	resp, err := hs.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	took := time.Since(start)
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || strings.Join(names(t, string(body)), ",") != "a" {
		t.Fatalf("all clusters: %d %s, want 200 with cluster one's a", resp.StatusCode, body)
	}
	warnings := strings.Join(resp.Header.Values("Warning"), "; ")
	for _, c := range []string{"stuck-a", "stuck-b"} {
		if !strings.Contains(warnings, c) {
			t.Errorf("warnings %q do not name %s", warnings, c)
		}
	}
	if took > 2*syncTimeout+time.Second/2 {
		t.Errorf("the view took %v, want one deadline of %v for every cluster", took, syncTimeout)
	}
}
