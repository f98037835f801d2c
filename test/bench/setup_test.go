package bench

import (
	"context"
	"fmt"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/kubebus/bridge/test/controlplane"
)

// processSetup is what the benchmarks that run the bridge as a process
// start from: a control plane of the benchmark's own, stopped when it
// ends; a client of it without client-side rate limits; a directory of
// the benchmark's; and the bridge and other programs, built into that
// directory in the background while the benchmark writes its objects.
type processSetup struct {
	began  time.Time // when the set-up began, for the scenario's total time
	cp     *controlplane.ControlPlane
	kc     kubernetes.Interface
	dir    string
	builds chan builtPrograms
}

type builtPrograms struct {
	paths []string // the bridge's, then each program's
	err   error
}

// startProcessSetup starts a control plane and the builds of the bridge
// and of programs (package paths), and returns at once.
func startProcessSetup(b *testing.B, programs ...string) *processSetup {
	b.Helper()
	s := &processSetup{began: time.Now(), dir: b.TempDir(), builds: make(chan builtPrograms, 1)}
	startCtx, cancel := context.WithTimeout(b.Context(), 2*time.Minute)
	cp, err := controlplane.Start(startCtx, controlplane.Options{})
	cancel()
	if err != nil {
		b.Fatalf("start control plane (run `make controlplane` first): %v", err)
	}
	b.Cleanup(func() { _ = cp.Stop() })
	s.cp = cp
	go func() {
		var r builtPrograms
		for _, pkg := range append([]string{"github.com/kubebus/bridge/cmd/bridge"}, programs...) {
			path, err := buildBinary(pkg, s.dir)
			if err != nil {
				r.err = err
				break
			}
			r.paths = append(r.paths, path)
		}
		s.builds <- r
	}()
	if s.kc, err = unlimitedClient(cp.RESTConfig()); err != nil {
		b.Fatal(err)
	}
	return s
}

// binaries waits for the builds and returns the bridge's path and then
// each program's, in the order startProcessSetup was given them.
func (s *processSetup) binaries(b *testing.B) (bridge string, programs []string) {
	b.Helper()
	r := <-s.builds
	if r.err != nil {
		b.Fatal(r.err)
	}
	return r.paths[0], r.paths[1:]
}

// namespaceNames is n namespace names: prefix-0, prefix-1 and so on.
func namespaceNames(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	return out
}
