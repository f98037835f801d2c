package kubelet

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"

	bridgeimage "github.com/kubebus/bridge/internal/image"
)

// Image is a container image the way a runtime holds it: its config and
// its layers, unpacked afresh for each container.
type Image struct {
	img    v1.Image
	config v1.Config
}

var (
	bridgeOnce  sync.Once
	bridgeImage *Image
	bridgeErr   error
)

// BridgeImage builds the bridge's image, once per test binary, the way
// `make image-oci` does: the bridge and the replica, static binaries built
// with the Dockerfile's flags, on the image's base layer (internal/image).
// It fails t when the build fails.
func BridgeImage(t testing.TB) *Image {
	t.Helper()
	bridgeOnce.Do(func() { bridgeImage, bridgeErr = buildBridgeImage() })
	if bridgeErr != nil {
		t.Fatal(bridgeErr)
	}
	return bridgeImage
}

func buildBridgeImage() (*Image, error) {
	dir, err := os.MkdirTemp("", "kubelet-image-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	bins := map[string][]byte{}
	for _, cmdName := range []string{"bridge", "replica"} {
		bin := filepath.Join(dir, cmdName)
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", bin, "github.com/kubebus/bridge/cmd/"+cmdName)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
		if out, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("kubelet: building the %s: %v\n%s", cmdName, err, out)
		}
		if bins[cmdName], err = os.ReadFile(bin); err != nil {
			return nil, err
		}
	}
	goroot, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		return nil, fmt.Errorf("kubelet: go env GOROOT: %w", err)
	}
	zoneinfo, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(goroot)), "lib", "time", "zoneinfo.zip"))
	if err != nil {
		return nil, fmt.Errorf("kubelet: the time zone database: %w", err)
	}
	img, err := bridgeimage.Build(bridgeimage.Options{Binary: bins["bridge"], Replica: bins["replica"], ZoneInfo: zoneinfo})
	if err != nil {
		return nil, err
	}
	return NewImage(img)
}

// NewImage holds img for running containers from it.
func NewImage(img v1.Image) (*Image, error) {
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("kubelet: the image's config: %w", err)
	}
	return &Image{img: img, config: cf.Config}, nil
}

// unpack writes the image's flattened filesystem into dir, with the
// modes and, when the process may, the owners its files have in the
// image.
func (i *Image) unpack(dir string) error {
	rc := mutate.Extract(i.img)
	defer rc.Close()
	chown := os.Geteuid() == 0
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("kubelet: unpacking the image: %w", err)
		}
		name := path.Clean("/" + h.Name)
		if name == "/" {
			continue
		}
		target := filepath.Join(dir, filepath.FromSlash(name))
		mode := os.FileMode(h.Mode).Perm()
		if h.Mode&0o1000 != 0 {
			mode |= os.ModeSticky
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				return err
			}
			f, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
			if err != nil {
				return err
			}
			_, err = io.Copy(f, tr)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		default:
			return fmt.Errorf("kubelet: the image's %s is of tar type %q, which this runtime does not unpack (a link could lead out of the root)", name, h.Typeflag)
		}
		if err := os.Chmod(target, mode); err != nil {
			return err
		}
		if chown {
			if err := os.Lchown(target, h.Uid, h.Gid); err != nil {
				return err
			}
		}
	}
}
