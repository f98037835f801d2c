// Package helmtest runs the helm that `make helm` builds, for tests of the
// chart: each run in a home of its own, so that no test reads or changes
// the user's helm configuration, repositories or cache.
//
// helm is taken from $BRIDGE_TEST_BIN_DIR, else the repository's .bin. A
// missing helm fails the test, never skips it.
package helmtest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kubebus/bridge/test/controlplane"
)

// Path finds the helm binary, or fails t saying how to build it.
func Path(t testing.TB) string {
	t.Helper()
	dir, err := controlplane.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "helm")
	info, err := os.Stat(path)
	if err != nil || !info.Mode().IsRegular() || info.Mode().Perm()&0o111 == 0 {
		t.Fatalf("helm not found at %s (run `make helm` in the repository root to build it into .bin/, or set BRIDGE_TEST_BIN_DIR): %v", path, err)
	}
	return path
}

// Run runs helm with args until ctx ends, in a home of its own, and
// returns its standard output, or an error holding its standard error.
func Run(ctx context.Context, t testing.TB, args ...string) (string, error) {
	t.Helper()
	home := t.TempDir()
	cmd := exec.CommandContext(ctx, Path(t), args...)
	cmd.Env = append(os.Environ(),
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(home, "config"),
		"HELM_DATA_HOME="+filepath.Join(home, "data"),
	)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("helm %s: %w\n%s%s", strings.Join(args, " "), err, stderr.String(), stdout.String())
	}
	return stdout.String(), nil
}
