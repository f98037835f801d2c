package image

import (
	"archive/tar"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	bridgeimage "github.com/kubebus/bridge/internal/image"
)

// unpack writes the image's flattened filesystem into a new directory,
// with each file's mode and, when the test runs as root, its owner, and
// returns the directory: the root filesystem a container of the image
// would have.
func unpack(t *testing.T, files map[string]entry) string {
	t.Helper()
	root := t.TempDir()
	// A container's root is everyone's to enter; t.TempDir's is its owner's.
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	chown := os.Geteuid() == 0
	// Parents before children, so that a directory's entry sets its mode
	// after MkdirAll made it.
	for _, p := range slices.Sorted(func(yield func(string) bool) {
		for p := range files {
			if !yield(p) {
				return
			}
		}
	}) {
		e := files[p]
		target := filepath.Join(root, filepath.FromSlash(p))
		mode := os.FileMode(e.hdr.Mode).Perm()
		if e.hdr.Mode&0o1000 != 0 {
			mode |= os.ModeSticky
		}
		switch e.hdr.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				t.Fatal(err)
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(target, e.data, 0o600); err != nil {
				t.Fatal(err)
			}
		default:
			t.Fatalf("%s is of tar type %q; the image holds only files and directories", p, e.hdr.Typeflag)
		}
		if err := os.Chmod(target, mode); err != nil {
			t.Fatal(err)
		}
		if chown {
			if err := os.Lchown(target, e.hdr.Uid, e.hdr.Gid); err != nil {
				t.Fatal(err)
			}
		}
	}
	return root
}

// runInImage runs the image's program at path, with args, the way a
// runtime would: chrooted into rootfs (the image unpacked), as the image's
// user, in its working directory, with its environment and nothing else.
// That takes root; run as another user, the test runs the program from
// rootfs as that user, itself not root either, and says so.
func runInImage(t *testing.T, rootfs string, cfg *v1.ConfigFile, path string, args ...string) ([]byte, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var cmd *exec.Cmd
	if os.Geteuid() == 0 {
		uid, gid := imageUser(t, cfg.Config.User)
		cmd = exec.CommandContext(ctx, path, args...)
		cmd.Dir = cfg.Config.WorkingDir
		cmd.SysProcAttr = &syscall.SysProcAttr{
			Chroot:     rootfs,
			Credential: &syscall.Credential{Uid: uid, Gid: gid, Groups: []uint32{gid}},
		}
	} else {
		t.Logf("not root: %s runs from the unpacked image as uid %d, without chroot", path, os.Geteuid())
		cmd = exec.CommandContext(ctx, filepath.Join(rootfs, filepath.FromSlash(path)), args...)
		cmd.Dir = rootfs
	}
	cmd.Env = append([]string(nil), cfg.Config.Env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.Bytes(), err
}

// imageUser is uid:gid of the image's USER, which must be numeric (as
// Kubernetes needs for runAsNonRoot) and not root.
func imageUser(t *testing.T, user string) (uid, gid uint32) {
	t.Helper()
	u, g, ok := strings.Cut(user, ":")
	un, uerr := strconv.ParseUint(u, 10, 32)
	gn, gerr := strconv.ParseUint(g, 10, 32)
	if !ok || uerr != nil || gerr != nil || un == 0 {
		t.Fatalf("the image's user %q is not a numeric uid:gid other than root", user)
	}
	if un != bridgeimage.NonRoot {
		t.Errorf("the image's user is %d, want nonroot (%d)", un, bridgeimage.NonRoot)
	}
	return uint32(un), uint32(gn)
}
