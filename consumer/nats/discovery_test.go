package nats

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/kubebus/bridge/test/poll"
	"github.com/kubebus/bridge/wire"
)

func (e *env) publishDiscovery(subject string, d wire.Discovery) {
	e.t.Helper()
	data, err := wire.MarshalDiscovery(d)
	if err != nil {
		e.t.Fatal(err)
	}
	m := &nats.Msg{Subject: subject, Data: data, Header: nats.Header{wire.NATSContentTypeHeader: []string{wire.DiscoveryContentType}}}
	if _, err := e.js.PublishMsg(context.Background(), m); err != nil {
		e.t.Fatal(err)
	}
}

// A document whose cluster is not its subject's is skipped and counted:
// one on kube._discovery.b claiming cluster a is not passed on as a's.
func TestDiscoveryLogSkipsDocumentOfAnotherSubject(t *testing.T) {
	e := newEnv(t, time.Hour, nil)
	e.publishDiscovery(wire.DiscoverySubject("kube", "b"), wire.Discovery{Cluster: "a", Server: "forged"})
	e.publishDiscovery(wire.DiscoverySubject("kube", "a"), wire.Discovery{Cluster: "a", Server: "a's"})
	e.publishDiscovery(wire.DiscoverySubject("kube", "b"), wire.Discovery{Cluster: "b.x", Server: "forged"})
	e.publishDiscovery(wire.DiscoverySubject("kube", "b.x"), wire.Discovery{Cluster: "b.x", Server: "b.x's"})

	dl, err := NewDiscoveryLog(e.js, Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var got []wire.Discovery
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- dl.Follow(ctx, func(d wire.Discovery) error {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, d)
			return nil
		})
	}()
	defer func() { cancel(); <-done }()
	poll.Until(t, 10*time.Second, func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		return len(got) >= 2 && dl.Skipped() >= 1, "documents of a and b.x, and one skipped"
	})
	mu.Lock()
	defer mu.Unlock()
	for _, d := range got {
		if d.Server == "forged" {
			t.Errorf("passed on %+v, from a subject of another cluster", d)
		}
	}
	if len(got) != 2 || dl.Skipped() != 1 {
		t.Errorf("%d documents passed on and %d skipped, want 2 and 1", len(got), dl.Skipped())
	}
}
