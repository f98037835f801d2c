package controlplane

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"
)

// shared is the control plane Shared starts once per test binary.
var shared struct {
	once sync.Once
	cp   *ControlPlane
	err  error
}

// Shared is one control plane, with default Options, for every test of a
// package that calls it: the first call starts it, and the package's
// TestMain stops it (see RunShared) after the tests ran. Tests that share
// it work in namespaces of their own. It fails t (never skips it) if the
// control plane cannot start.
func Shared(t testing.TB) *ControlPlane {
	t.Helper()
	shared.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		shared.cp, shared.err = Start(ctx, Options{})
	})
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return shared.cp
}

// RunShared runs a package's tests, for its TestMain, then stops the
// control plane Shared started, if it did. It returns the exit code.
func RunShared(m *testing.M) int {
	code := m.Run()
	if shared.cp != nil {
		if err := shared.cp.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "controlplane: stop the shared control plane:", err)
			code = max(code, 1)
		}
	}
	return code
}
