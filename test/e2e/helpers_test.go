package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubebus/bridge/internal/bridge"
	"github.com/kubebus/bridge/internal/config"
	"github.com/kubebus/bridge/sink"
	"github.com/kubebus/bridge/test/logtest"
	"github.com/kubebus/bridge/wire"
)

var nsCounter atomic.Int64

// namespace creates a namespace of the test's own and returns its name.
func namespace(t *testing.T, prefix string) string {
	t.Helper()
	name := fmt.Sprintf("%s-%d-%d", prefix, os.Getpid()%10000, nsCounter.Add(1))
	_, err := kube(t).CoreV1().Namespaces().Create(t.Context(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create namespace %s: %v", name, err)
	}
	return name
}

func kube(t *testing.T) kubernetes.Interface {
	t.Helper()
	c, err := kubernetes.NewForConfig(cp.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// running is a bridge running in this process.
type running struct {
	b      *bridge.Bridge
	cancel context.CancelFunc
	done   chan error
	logs   *logtest.Buffer // everything it logged, also written to the test's output
}

// startBridge runs a bridge configured by env (BRIDGE_CHECKPOINT defaults
// to none) and waits until it is ready. It publishes to s, or, when s is
// nil, to the sink env names.
func startBridge(t *testing.T, env map[string]string, s sink.Sink) *running {
	t.Helper()
	var opts []bridge.Option
	if s != nil {
		opts = append(opts, bridge.WithSink(s))
	}
	return startBridgeWith(t, env, opts...)
}

// startBridgeWith is startBridge with the bridge's options.
func startBridgeWith(t *testing.T, env map[string]string, opts ...bridge.Option) *running {
	t.Helper()
	environ := []string{"BRIDGE_CHECKPOINT=none", "BRIDGE_CHECKPOINT_INTERVAL=100ms"}
	for k, v := range env {
		environ = append(environ, k+"="+v)
	}
	cfg, err := config.Load(environ)
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	logs := &logtest.Buffer{}
	log := slog.New(slog.NewTextHandler(io.MultiWriter(t.Output(), logs), &slog.HandlerOptions{Level: slog.LevelInfo}))
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{b: bridge.New(cfg, cp.RESTConfig(), log, opts...), cancel: cancel, done: make(chan error, 1), logs: logs}
	go func() { r.done <- r.b.Run(ctx) }()
	t.Cleanup(func() { r.stop(t) })

	select {
	case <-r.b.Ready():
	case err := <-r.done:
		r.done <- err
		t.Fatalf("bridge stopped before it was ready: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("bridge not ready after 60s")
	}
	return r
}

// stop shuts the bridge down gracefully and waits for it; safe to call
// twice.
func (r *running) stop(t *testing.T) {
	t.Helper()
	r.cancel()
	select {
	case err, ok := <-r.done:
		if ok && err != nil {
			t.Errorf("bridge: %v", err)
		}
		if ok {
			close(r.done)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("bridge did not stop within 60s")
	}
}

// rvLess compares resourceVersions as the integers etcd makes them.
func rvLess(a, b string) bool {
	x, err1 := strconv.ParseUint(a, 10, 64)
	y, err2 := strconv.ParseUint(b, 10, 64)
	if err1 != nil || err2 != nil {
		panic(fmt.Sprintf("resourceVersions %q, %q are not integers", a, b))
	}
	return x < y
}

// readEvents decodes the complete JSON lines of a file written by the
// stdout sink; a last line still being written is left for later.
func readEvents(t *testing.T, path string) []*wire.Message {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []*wire.Message
	r := bufio.NewReader(f)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return out // EOF: a partial line is not an event yet
		}
		m := &wire.Message{}
		if err := m.UnmarshalJSON([]byte(strings.TrimSpace(line))); err != nil {
			t.Fatalf("%s: bad event line %q: %v", path, line, err)
		}
		out = append(out, m)
	}
}

// byKey groups messages by object key, keeping their order.
func byKey(msgs []*wire.Message) map[string][]*wire.Message {
	out := map[string][]*wire.Message{}
	for _, m := range msgs {
		out[m.Key()] = append(out[m.Key()], m)
	}
	return out
}
