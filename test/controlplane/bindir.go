package controlplane

import (
	"bufio"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

const (
	// BinDirEnv names the environment variable that overrides where the
	// kube-apiserver and etcd binaries are looked up.
	BinDirEnv = "BRIDGE_TEST_BIN_DIR"

	modulePath = "github.com/kubebus/bridge"
	buildHint  = "run `make controlplane` in the repository root to build it, or set " + BinDirEnv
)

// resolveBinDir applies the Options.BinDir defaults.
func resolveBinDir(dir string) (string, error) {
	if dir == "" {
		dir = os.Getenv(BinDirEnv)
	}
	if dir == "" {
		root, err := moduleRoot()
		if err != nil {
			return "", err
		}
		dir = filepath.Join(root, ".bin")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("controlplane: binary directory %q: %w", dir, err)
	}
	return abs, nil
}

// moduleRoot walks up from the working directory to the directory whose
// go.mod declares modulePath (skipping nested modules such as test/tools).
func moduleRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("controlplane: locating the module root: %w", err)
	}
	for dir := wd; ; {
		if declaresModule(filepath.Join(dir, "go.mod"), modulePath) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("controlplane: no go.mod for module %s at or above %s and %s is not set; cannot find the control-plane binaries", modulePath, wd, BinDirEnv)
		}
		dir = parent
	}
}

// declaresModule reports whether the go.mod at path has "module want".
func declaresModule(path, want string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "module" {
			return strings.Trim(fields[1], `"`+"`") == want
		}
	}
	return false
}

// findBinary returns the path of an executable name in dir, or an error
// that tells the reader how to build it.
func findBinary(dir, name string) (string, error) {
	path := filepath.Join(dir, name)
	info, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("controlplane: %s binary not found at %s (%s): %w", name, path, buildHint, err)
	}
	if !info.Mode().IsRegular() || info.Mode().Perm()&0o111 == 0 {
		return "", fmt.Errorf("controlplane: %s at %s is not an executable file (%s): %w", name, path, buildHint, fs.ErrPermission)
	}
	return path, nil
}

// BinDir is where the tools that make builds for tests are: $BRIDGE_TEST_BIN_DIR,
// else <module root>/.bin.
func BinDir() (string, error) { return resolveBinDir("") }
