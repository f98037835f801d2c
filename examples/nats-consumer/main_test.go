package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	natssink "github.com/kubebus/bridge/sink/nats"
	"github.com/kubebus/bridge/test/bustest"
	"github.com/kubebus/bridge/test/logtest"
	"github.com/kubebus/bridge/test/natstest"
	"github.com/kubebus/bridge/test/poll"
	"github.com/kubebus/bridge/wire"
)

// lines splits what run printed into lines.
func lines(out *logtest.Buffer) []string {
	return strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
}

// consume runs the example until it printed n lines, then stops it.
func consume(t *testing.T, o options, want int) []string {
	t.Helper()
	out := &logtest.Buffer{}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- run(ctx, o, io.Writer(out)) }()
	poll.Until(t, 30*time.Second, func() (bool, string) {
		select {
		case err := <-done:
			t.Fatalf("run stopped early: %v; printed %q", err, lines(out))
		default:
		}
		n := strings.Count(out.String(), "\n")
		return n >= want, fmt.Sprintf("printed %d of %d lines: %q", n, want, lines(out))
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
	return lines(out)
}

func event(ns, name string, rv int, action string) *wire.Message {
	cms := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	return bustest.Object{Cluster: "demo", Resource: cms, Kind: "ConfigMap", Namespace: ns, Name: name}.Message(action, rv, []byte(`{"object":{}}`))
}

// The example prints one line per change, in both content modes, and a
// second run of the same durable consumer prints only what is new. The
// stream is of the history layout, which keeps every change.
func TestRun(t *testing.T) {
	srv := natstest.Start(t, natstest.Options{})
	publish := func(mode natssink.CEMode, msgs ...*wire.Message) {
		t.Helper()
		vars := srv.Env()
		vars["BRIDGE_NATS_CE_MODE"] = string(mode)
		vars["BRIDGE_NATS_LAYOUT"] = string(natssink.LayoutHistory)
		s := bustest.NATSSink(t, vars)
		if err := s.Publish(t.Context(), msgs); err != nil {
			t.Fatal(err)
		}
	}
	publish(natssink.CEStructured, event("team-a", "web", 10, "added"), event("team-b", "db", 11, "added"))
	publish(natssink.CEBinary, event("team-a", "web", 12, "updated"))

	o := options{url: srv.URL(), stream: "KUBE", durable: "example", filter: "kube.demo.core.v1.configmaps.team-a.>"}
	got := consume(t, o, 2)
	want := []string{
		"added    team-a/web  rv=10  snapshot=false  kube.demo.core.v1.configmaps.team-a.web",
		"updated  team-a/web  rv=12  snapshot=false  kube.demo.core.v1.configmaps.team-a.web",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("printed\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	publish(natssink.CEStructured, event("team-a", "web", 13, "deleted"))
	got = consume(t, o, 1)
	if len(got) != 1 || !strings.HasPrefix(got[0], "deleted  team-a/web  rv=13") {
		t.Fatalf("second run printed %q, want only the new delete", got)
	}
}
