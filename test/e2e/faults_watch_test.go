package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubebus/bridge/internal/bridge"
	"github.com/kubebus/bridge/internal/config"
	"github.com/kubebus/bridge/internal/metrics"
	"github.com/kubebus/bridge/sink/sinktest"
	"github.com/kubebus/bridge/test/metricstest"
	"github.com/kubebus/bridge/test/poll"
)

// stallTimeout is BRIDGE_WATCH_STALL_TIMEOUT in these tests: short, so
// that they are quick, and long enough that a healthy watch on a loaded
// machine is never taken for a stalled one (it is reopened every 2s).
const stallTimeout = 4 * time.Second

// stallBound is how long after a fault the bridge may take to report it:
// the stall timeout after the last answer (twice it for a revoked
// permission, which shows when the watch is next reopened, within half of
// it, and is reported once calls kept failing for the whole of it), plus
// the watchdog's tick and a margin for a loaded machine.
const stallBound = 2*stallTimeout + 5*time.Second

// recoverBound is how long the bridge may take to work again once the
// fault is gone: client-go's reflector waits between failed attempts, up
// to 30s plus up to 100% jitter.
const recoverBound = 90 * time.Second

// Issue 11, point 6: the network path to the API server stops carrying
// anything, without an error on either side (a proxy that stops
// forwarding). Within the stall timeout the bridge logs a warning naming
// the resource, bridge_watch_healthy turns 0, the time of the last
// contact falls behind, the cut watch is counted in
// bridge_watch_errors_total, and /readyz fails. Once the path carries
// again, the bridge recovers on its own.
func TestFaultAPIServerHangs(t *testing.T) {
	ns := namespace(t, "hang")
	api, err := url.Parse(cp.APIServerURL())
	if err != nil {
		t.Fatal(err)
	}
	px := startCutProxy(t, api.Host)
	env := map[string]string{
		"BRIDGE_RESOURCES":           "configmaps",
		"BRIDGE_NAMESPACES":          ns,
		"BRIDGE_CHECKPOINT":          "none",
		"BRIDGE_WATCH_STALL_TIMEOUT": stallTimeout.String(),
		"KUBECONFIG":                 proxiedKubeconfig(t, px.addr), // after startProc's own, so it wins
	}
	p := startProc(t, procEnv(env), filepath.Join(t.TempDir(), "stdout"))
	addr := p.httpAddr(t)
	if code, body := readyz(addr); code != 200 {
		t.Fatalf("/readyz %d before the hold: %s", code, body)
	}
	errorsBefore := watchErrors(addr)

	px.hold()
	held := time.Now()
	var warned, unhealthy time.Duration
	poll.Until(t, stallBound, func() (bool, string) {
		if warned == 0 && len(warnings(p, "configmaps")) > 0 {
			warned = time.Since(held)
		}
		s, ok := scrape(addr)
		if unhealthy == 0 && ok && gauge(s, "bridge_watch_healthy", "configmaps") == 0 {
			unhealthy = time.Since(held)
		}
		return warned > 0 && unhealthy > 0, fmt.Sprintf("%s after the hold: warning logged after %s, bridge_watch_healthy 0 after %s (0s: not yet)",
			time.Since(held).Round(time.Millisecond), warned.Round(time.Millisecond), unhealthy.Round(time.Millisecond))
	})
	s, _ := scrape(addr)
	contact := gauge(s, "bridge_watch_last_contact_timestamp_seconds", "configmaps")
	if age := time.Since(time.Unix(0, int64(contact*1e9))); age < stallTimeout {
		t.Errorf("bridge_watch_last_contact_timestamp_seconds is %s old, want at least the stall timeout %s", age.Round(time.Millisecond), stallTimeout)
	}
	if code, body := readyz(addr); code != 503 || !strings.Contains(body, "configmaps") {
		t.Errorf("/readyz %d %q during the hold, want 503 naming configmaps", code, body)
	}
	poll.Until(t, stallBound, func() (bool, string) {
		n := watchErrors(addr)
		return n > errorsBefore, fmt.Sprintf("bridge_watch_errors_total %v, was %v before the hold", n, errorsBefore)
	})

	px.release()
	released := time.Now()
	poll.Until(t, recoverBound, func() (bool, string) {
		s, ok := scrape(addr)
		code, body := readyz(addr)
		return ok && gauge(s, "bridge_watch_healthy", "configmaps") == 1 && code == 200,
			fmt.Sprintf("after the release: bridge_watch_healthy %v, /readyz %d %s", gauge(s, "bridge_watch_healthy", "configmaps"), code, body)
	})
	recovered := time.Since(released)
	errorsAfter := watchErrors(addr)
	if code := p.terminate(t); code != 0 {
		t.Errorf("exit code %d after SIGTERM", code)
	}
	t.Logf("held for %s: warning after %s, bridge_watch_healthy 0 after %s (stall timeout %s); healthy and ready %s after the release; bridge_watch_errors_total %v -> %v; warnings: %s",
		released.Sub(held).Round(time.Millisecond), warned.Round(time.Millisecond), unhealthy.Round(time.Millisecond), stallTimeout,
		recovered.Round(time.Millisecond), errorsBefore, errorsAfter, strings.Join(warnings(p, "configmaps"), ""))
}

// Issue 11, point 6: a user allowed to list a resource but not to watch it.
// The bridge refuses to start, exit code 1 as for a resource it may not
// list, and says which resource and which verb; it does not run relisting
// forever.
func TestStartRefusesWatchForbidden(t *testing.T) {
	ns := namespace(t, "nowatch")
	user := "list-only-" + ns
	grant(t, ns, user, "get", "list")
	kubeconfig := impersonatingKubeconfig(t, user)

	code, out := runToExit(t, []string{"KUBECONFIG=" + kubeconfig, "BRIDGE_RESOURCES=configmaps", "BRIDGE_NAMESPACES=" + ns,
		"BRIDGE_CHECKPOINT=none"})
	if code != 1 {
		t.Errorf("exit code %d, want 1; output:\n%s", code, out)
	}
	for _, want := range []string{"watch configmaps in namespace " + ns, "grant the watch verb"} {
		if !strings.Contains(out, want) {
			t.Errorf("output does not say %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, `"msg":"ready`) {
		t.Errorf("the bridge said it was ready:\n%s", out)
	}
}

// Issue 11, point 6: the bridge's permission to read its resource is
// revoked while it runs. Within a bounded time it is not ready, naming the
// resource, and bridge_watch_healthy is 0; once the permission is back, it
// is ready again, bridge_watch_healthy is 1, and a change made then is
// published.
func TestFaultWatchPermissionRevoked(t *testing.T) {
	ns := namespace(t, "revoked")
	user := "bridge-" + ns
	binding := grant(t, ns, user, "get", "list", "watch")

	cfg, err := config.Load([]string{"BRIDGE_RESOURCES=configmaps", "BRIDGE_NAMESPACES=" + ns, "BRIDGE_CHECKPOINT=none",
		"BRIDGE_WATCH_STALL_TIMEOUT=" + stallTimeout.String()})
	if err != nil {
		t.Fatal(err)
	}
	rc := rest.CopyConfig(cp.RESTConfig())
	rc.Impersonate = rest.ImpersonationConfig{UserName: user}
	m := metrics.New()
	sink := &sinktest.Recorder{}
	b := bridge.New(cfg, rc, slog.New(slog.NewTextHandler(t.Output(), nil)), bridge.WithSink(sink), bridge.WithMetrics(m))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("bridge: %v", err)
		}
	})
	select {
	case <-b.Ready():
	case err := <-done:
		done <- err
		t.Fatalf("bridge stopped before it was ready: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("bridge not ready after 60s")
	}
	if err := b.Readiness(); err != nil {
		t.Fatalf("not ready before the revocation: %v", err)
	}

	roles := kube(t).RbacV1().RoleBindings(ns)
	if err := roles.Delete(t.Context(), binding.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	revoked := time.Now()
	var notReady error
	poll.Until(t, stallBound, func() (bool, string) {
		notReady = b.Readiness()
		healthy, ok := seriesOf(t, m, "bridge_watch_healthy", "resource")["configmaps"]
		return notReady != nil && ok && healthy == 0, fmt.Sprintf("%s after the revocation: Readiness %v, bridge_watch_healthy %v",
			time.Since(revoked).Round(time.Millisecond), notReady, healthy)
	})
	reported := time.Since(revoked)
	if !strings.Contains(notReady.Error(), "configmaps") || !strings.Contains(notReady.Error(), "forbidden") {
		t.Errorf("Readiness says %q; want it to name configmaps and say forbidden", notReady)
	}

	binding.ResourceVersion = ""
	if _, err := roles.Create(t.Context(), binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	restored := time.Now()
	poll.Until(t, recoverBound, func() (bool, string) {
		err := b.Readiness()
		healthy := seriesOf(t, m, "bridge_watch_healthy", "resource")["configmaps"]
		return err == nil && healthy == 1, fmt.Sprintf("%s after the restore: Readiness %v, bridge_watch_healthy %v",
			time.Since(restored).Round(time.Millisecond), err, healthy)
	})
	recovered := time.Since(restored)
	cm, err := kube(t).CoreV1().ConfigMaps(ns).Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "after-restore"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	poll.Until(t, time.Minute, func() (bool, string) {
		for _, msg := range sink.Accepted() {
			if msg.Name == cm.Name && msg.ResourceVersion == cm.ResourceVersion {
				return true, ""
			}
		}
		return false, "the change made after the restore was not published"
	})
	t.Logf("not ready %s after the revocation (stall timeout %s): %v; ready again %s after the restore",
		reported.Round(time.Millisecond), stallTimeout, notReady, recovered.Round(time.Millisecond))
}

// grant lets user do verbs on the ConfigMaps of ns, with a Role and a
// RoleBinding, and returns the binding.
func grant(t *testing.T, ns, user string, verbs ...string) *rbacv1.RoleBinding {
	t.Helper()
	rbac := kube(t).RbacV1()
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "configmaps-reader"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: verbs}},
	}
	if _, err := rbac.Roles(ns).Create(t.Context(), role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "configmaps-reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: user}},
	}
	created, err := rbac.RoleBindings(ns).Create(t.Context(), binding, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return created
}

// impersonatingKubeconfig writes a copy of the control plane's kubeconfig
// that acts as user, and returns its path.
func impersonatingKubeconfig(t *testing.T, user string) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(cp.KubeconfigPath())
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range cfg.AuthInfos {
		a.Impersonate = user
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// warnings are the bridge's log lines at level WARN or above that name
// resource.
func warnings(p *proc, resource string) []string {
	var out []string
	for line := range strings.Lines(p.logText()) {
		var rec struct{ Level, Resource string }
		if json.Unmarshal([]byte(line), &rec) == nil && (rec.Level == "WARN" || rec.Level == "ERROR") && rec.Resource == resource {
			out = append(out, line)
		}
	}
	return out
}

// watchErrors is the bridge's bridge_watch_errors_total, all resources.
func watchErrors(addr string) float64 {
	s, _ := scrape(addr)
	return s.Sum("bridge_watch_errors_total")
}

// gauge is the value of the series of the gauge name whose resource label
// is resource, or -1 when there is none.
func gauge(s metricstest.Samples, name, resource string) float64 {
	f := s[name]
	if f == nil {
		return -1
	}
	for _, m := range f.GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "resource" && l.GetValue() == resource {
				return m.GetGauge().GetValue()
			}
		}
	}
	return -1
}
