package kubelet

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// shimEnv names the file that holds a shimSpec. The test binary, started
// again with it set, becomes the container's runtime for an instant: it
// sets up the container's filesystem in its own mount namespace, becomes
// the container's user and executes the container's process.
const shimEnv = "KUBELET_CONTAINER_SPEC"

// shimSpec is what the shim needs to start one container.
type shimSpec struct {
	// Root is the container's root filesystem, an unpacked image.
	Root string
	// ReadOnlyRoot mounts Root read-only (readOnlyRootFilesystem).
	ReadOnlyRoot bool
	// Mounts are mounted in Root in order, before it is made read-only.
	Mounts []shimMount
	// Dir is the working directory, inside Root.
	Dir string
	// Argv is the process's command line; Argv[0] is a path in Root, or
	// a name looked up in the PATH of Env.
	Argv []string
	Env  []string
	// SetUser switches to UID, GID and Groups; without it the process
	// keeps the shim's user (see Node's doc for when).
	SetUser    bool
	UID, GID   int
	Groups     []int
	NoNewPrivs bool
}

// shimMount is one mount in the container.
type shimMount struct {
	// Source is a directory of the host; "" for /proc.
	Source string
	// Target is the mount point's path inside the container.
	Target   string
	ReadOnly bool
	// Proc is the host's /proc, bound recursively.
	Proc bool
}

func init() {
	file := os.Getenv(shimEnv)
	if file == "" {
		return
	}
	err := runShim(file)
	// runShim returns only when it failed.
	fmt.Fprintf(os.Stderr, "kubelet: starting the container: %v\n", err)
	os.Exit(128)
}

// runShim starts the container described in file, replacing this
// process; it returns only on failure.
func runShim(file string) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	var s shimSpec
	if err := json.Unmarshal(data, &s); err != nil {
		return err
	}
	// The root is a directory of the host: a bind mount of it on itself
	// can then be remounted read-only without touching the host's view.
	if err := unix.Mount(s.Root, s.Root, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind %s: %w", s.Root, err)
	}
	for _, m := range s.Mounts {
		target := filepath.Join(s.Root, m.Target)
		source := m.Source
		if m.Proc {
			source = "/proc"
		}
		if err := mountPoint(s.Root, source, target); err != nil {
			return err
		}
		if err := unix.Mount(source, target, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("mount %s on %s: %w", source, m.Target, err)
		}
		flags := uintptr(unix.MS_BIND | unix.MS_REMOUNT | unix.MS_NOSUID | unix.MS_NODEV)
		if m.ReadOnly {
			flags |= unix.MS_RDONLY
		}
		if !m.Proc {
			if err := unix.Mount("", target, "", flags, ""); err != nil {
				return fmt.Errorf("remount %s: %w", m.Target, err)
			}
		}
	}
	if s.ReadOnlyRoot {
		if err := unix.Mount("", s.Root, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
			return fmt.Errorf("remount the root read-only: %w", err)
		}
	}
	if err := unix.Chroot(s.Root); err != nil {
		return fmt.Errorf("chroot %s: %w", s.Root, err)
	}
	if err := os.Chdir(s.Dir); err != nil {
		return fmt.Errorf("working directory: %w", err)
	}
	if s.SetUser {
		if err := syscall.Setgroups(s.Groups); err != nil {
			return fmt.Errorf("supplementary groups %v: %w", s.Groups, err)
		}
		if err := syscall.Setgid(s.GID); err != nil {
			return fmt.Errorf("gid %d: %w", s.GID, err)
		}
		if err := syscall.Setuid(s.UID); err != nil {
			return fmt.Errorf("uid %d: %w", s.UID, err)
		}
	}
	if s.NoNewPrivs {
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			return fmt.Errorf("no_new_privs: %w", err)
		}
	}
	// A change of credentials clears the parent-death signal: set it
	// again, so that the container dies with the test.
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(unix.SIGKILL), 0, 0, 0); err != nil {
		return fmt.Errorf("parent-death signal: %w", err)
	}
	if os.Getppid() == 1 {
		return fmt.Errorf("the test ended while the container started")
	}
	argv0, err := lookPath(s.Argv[0], s.Env)
	if err != nil {
		return err
	}
	return syscall.Exec(argv0, s.Argv, s.Env)
}

// mountPoint makes target, in the container's root, a directory or an
// empty file as source is one. A target whose path holds a link (one an
// earlier container left in a volume mounted above it) is refused: the
// mount would follow it out of the root.
func mountPoint(root, source, target string) error {
	info, err := os.Stat(source)
	if err != nil {
		return err
	}
	for dir := filepath.Dir(target); dir != root && len(dir) > len(root); dir = filepath.Dir(dir) {
		if fi, err := os.Lstat(dir); err == nil && fi.Mode()&os.ModeSymlink != 0 {
			return fmt.Errorf("mount point %s: %s is a link", target, dir)
		}
	}
	if fi, err := os.Lstat(target); err == nil && fi.Mode()&os.ModeSymlink != 0 {
		return fmt.Errorf("mount point %s is a link", target)
	}
	if info.IsDir() {
		return os.MkdirAll(target, 0o755)
	}
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	return f.Close()
}

// lookPath finds name as the container runtime does: a path as it is,
// a bare name in the PATH of the container's environment.
func lookPath(name string, env []string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	pathList := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			pathList = v
		}
	}
	for _, dir := range filepath.SplitList(pathList) {
		p := filepath.Join(dir, name)
		if info, err := os.Stat(p); err == nil && info.Mode().IsRegular() && info.Mode().Perm()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("executable %q not found in the container's PATH %q", name, pathList)
}
