package image

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"

	bridgeimage "github.com/kubebus/bridge/internal/image"
)

const (
	root       = "../.."
	dockerfile = root + "/Dockerfile"
	makefile   = root + "/Makefile"
	// chartValues holds the pod's user and the metrics port.
	chartValues = root + "/charts/bridge/values.yaml"
	// chartReplica runs the replica from the image.
	chartReplica = root + "/charts/bridge/templates/replica-deployment.yaml"
	tag          = "ghcr.io/kubebus/bridge:test"
	// What the test stamps the image with, as make passes git's values.
	version  = "v0.0.0-test"
	revision = "0123456789abcdef0123456789abcdef01234567"
	created  = "1700000000"
)

// entry is a file of the image's flattened filesystem.
type entry struct {
	hdr  *tar.Header
	data []byte
}

// binary is a program the Dockerfile copies into the image.
type binary struct {
	dest  string // its path in the image, as the Dockerfile's COPY says
	pkg   string // the package the build stage builds it from
	built string // the binary as the test built it, before it went into the image
}

// built is the image as the test built and read it back.
type built struct {
	binaries []binary // in the order of the Dockerfile's COPY lines
	tool     string   // the image builder's command
	goarch   string   // the binary's architecture, go env GOARCH
	goroot   string   // where the time zone database comes from
	layout   string
	tar      string
	img      v1.Image
	cfg      *v1.ConfigFile
	files    map[string]entry // by absolute path
	layers   [][]string       // each layer's files, by absolute path
	final    stage            // the Dockerfile's last stage
	build    stage            // the Dockerfile's stage that builds the binaries
}

// binary returns the image's binary at dest, failing t if the Dockerfile
// copies none there.
func (b *built) binary(t *testing.T, dest string) binary {
	t.Helper()
	for _, bin := range b.binaries {
		if bin.dest == dest {
			return bin
		}
	}
	t.Fatalf("the Dockerfile copies nothing to %s", dest)
	return binary{}
}

// buildImage builds the binaries the Dockerfile copies into the image with
// the Dockerfile's flags, and the image with the builder's command, as
// `make image-oci` does, and reads it back.
func buildImage(t *testing.T) *built {
	t.Helper()
	stages, err := parseDockerfile(dockerfile)
	if err != nil {
		t.Fatal(err)
	}
	if len(stages) < 2 {
		t.Fatalf("%s has %d stages, want a build stage and the image", dockerfile, len(stages))
	}
	b := &built{final: stages[len(stages)-1]}
	if len(b.final.copies) == 0 {
		t.Fatalf("%s copies nothing into the image", dockerfile)
	}
	from := b.final.copies[0].from
	for _, s := range stages {
		if s.name != "" && s.name == from {
			b.build = s
		}
	}
	builds := goBuilds(b.build.runs)
	if len(builds) == 0 {
		t.Fatalf("%s: no go build in the stage %q the image copies from", dockerfile, from)
	}
	var env, flags []string
	for _, c := range b.final.copies {
		if c.from != from {
			t.Fatalf("%s: COPY %s comes from %q, the other binaries from %q", dockerfile, c.dest, c.from, from)
		}
		if len(c.sources) != 1 {
			t.Fatalf("%s: COPY %q %s: want one binary per COPY", dockerfile, c.sources, c.dest)
		}
		i := slices.IndexFunc(builds, func(g goBuildCmd) bool { return g.out == c.sources[0] })
		if i < 0 {
			t.Fatalf("%s: COPY %s %s: no go build in the stage %q writes %s", dockerfile, c.sources[0], c.dest, from, c.sources[0])
		}
		g := builds[i]
		if flags == nil {
			env, flags = g.env, g.flags
		} else if !slices.Equal(g.flags, flags) || !slices.Equal(g.env, env) {
			t.Errorf("%s: %s is built with %q %q, %s with %q %q", dockerfile, g.pkg, g.env, g.flags, b.binaries[0].pkg, env, flags)
		}
		b.binaries = append(b.binaries, binary{dest: c.dest, pkg: g.pkg})
	}
	// make builds each binary with the same flags, for the host and for
	// the image.
	for _, target := range []string{"build", "image-oci"} {
		recipe, err := makeRecipe(makefile, target)
		if err != nil {
			t.Fatal(err)
		}
		mbuilds := goBuilds(recipe)
		for _, bin := range b.binaries {
			i := slices.IndexFunc(mbuilds, func(g goBuildCmd) bool { return g.pkg == bin.pkg })
			if i < 0 {
				t.Errorf("make %s does not build %s", target, bin.pkg)
			} else if !slices.Equal(mbuilds[i].flags, flags) {
				t.Errorf("make %s builds %s with %q, the Dockerfile with %q", target, bin.pkg, mbuilds[i].flags, flags)
			}
		}
		if len(mbuilds) != len(b.binaries) {
			t.Errorf("make %s builds %d programs, the Dockerfile copies %d into the image", target, len(mbuilds), len(b.binaries))
		}
	}

	dir := t.TempDir()
	goenv := strings.Fields(string(goCmd(t, nil, "env", "GOARCH", "GOROOT")))
	if len(goenv) != 2 {
		t.Fatalf("go env GOARCH GOROOT: %q", goenv)
	}
	b.goarch, b.goroot = goenv[0], goenv[1]
	for i := range b.binaries {
		bin := &b.binaries[i]
		bin.built = filepath.Join(dir, path.Base(bin.dest))
		args := append(append([]string{"build"}, flags...), "-o", bin.built, bin.pkg)
		start := time.Now()
		goCmd(t, append(env, "GOOS=linux"), args...)
		t.Logf("%s built in %v", bin.pkg, time.Since(start).Round(time.Millisecond))
	}

	b.layout = filepath.Join(dir, "image")
	b.tar = filepath.Join(dir, "image.tar")
	b.tool = filepath.Join(dir, "bridge-image")
	start := time.Now()
	goCmd(t, nil, "build", "-o", b.tool, "./cmd/bridge-image")
	t.Logf("image builder built in %v", time.Since(start).Round(time.Millisecond))
	start = time.Now()
	runTool(t, b, b.layout, "-tar", b.tar)
	t.Logf("image written in %v", time.Since(start).Round(time.Millisecond))
	start = time.Now()
	b.img = layoutImage(t, b.layout)
	b.cfg, err = b.img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	b.files, b.layers = flatten(t, b.img)
	t.Logf("image read back in %v", time.Since(start).Round(time.Millisecond))
	return b
}

// runTool runs the image builder's command as the Makefile does.
func runTool(t *testing.T, b *built, out string, extra ...string) {
	t.Helper()
	args := append([]string{
		"-binary", b.binary(t, bridgeimage.Entrypoint).built, "-replica", b.binary(t, bridgeimage.ReplicaPath).built, "-zoneinfo", filepath.Join(b.goroot, "lib", "time", "zoneinfo.zip"),
		"-out", out, "-tag", tag, "-version", version, "-revision", revision, "-created", created,
	}, extra...)
	cmd := exec.Command(b.tool, args...)
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("bridge-image %q: %v\n%s", args, err, msg)
	}
}

func goCmd(t *testing.T, env []string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go %q: %v\n%s", args, err, stderr.Bytes())
	}
	return out
}

// layoutImage reads the only image of an OCI layout, and checks its name.
func layoutImage(t *testing.T, dir string) v1.Image {
	t.Helper()
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 1 {
		t.Fatalf("the layout holds %d manifests, want 1", len(im.Manifests))
	}
	m := im.Manifests[0]
	if got := m.Annotations[bridgeimage.RefNameAnnotation]; got != tag {
		t.Errorf("the layout names the image %q, want %q", got, tag)
	}
	img, err := idx.Image(m.Digest)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// flatten returns the image's filesystem, as a container sees it, and
// checks on the way that every layer has the digest the manifest says,
// compressed, and the one the config says (the diff ID), uncompressed.
// Each layer is read once: the race detector makes decompression slow.
// It returns, too, the paths each layer holds.
func flatten(t *testing.T, img v1.Image) (map[string]entry, [][]string) {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]entry{}
	names := make([][]string, len(layers))
	for i, l := range layers {
		rc, err := l.Compressed()
		if err != nil {
			t.Fatal(err)
		}
		compressed, uncompressed := sha256.New(), sha256.New()
		zr, err := gzip.NewReader(io.TeeReader(rc, compressed))
		if err != nil {
			t.Fatalf("layer %d: %v", i, err)
		}
		tr := tar.NewReader(io.TeeReader(zr, uncompressed))
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("layer %d: %v", i, err)
			}
			if strings.HasPrefix(path.Base(h.Name), ".wh.") {
				t.Errorf("layer %d has a whiteout, %s: nothing is to be deleted in this image", i, h.Name)
			}
			data, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			files[path.Clean("/"+h.Name)] = entry{hdr: h, data: data}
			names[i] = append(names[i], path.Clean("/"+h.Name))
		}
		// The rest of the stream: the tar's padding, gzip's trailer.
		if _, err := io.Copy(io.Discard, zr); err != nil {
			t.Fatalf("layer %d: %v", i, err)
		}
		if _, err := io.Copy(io.Discard, io.TeeReader(rc, compressed)); err != nil {
			t.Fatal(err)
		}
		rc.Close()
		digest, _ := l.Digest()
		diffID, _ := l.DiffID()
		if got := "sha256:" + hex.EncodeToString(compressed.Sum(nil)); got != digest.String() {
			t.Errorf("layer %d: the manifest says %s, the blob is %s", i, digest, got)
		}
		if got := "sha256:" + hex.EncodeToString(uncompressed.Sum(nil)); got != diffID.String() {
			t.Errorf("layer %d: the config says diff ID %s, the layer is %s", i, diffID, got)
		}
	}
	return files, names
}

func mustDigest(t *testing.T, img v1.Image) v1.Hash {
	t.Helper()
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// sameConfigAndLayers compares what a container would run: the config and
// every layer, by digest, and checks each layer's blob against its digest.
func sameConfigAndLayers(t *testing.T, got, want v1.Image) {
	t.Helper()
	gc, err := got.ConfigName()
	if err != nil {
		t.Fatal(err)
	}
	wc, _ := want.ConfigName()
	if gc != wc {
		t.Errorf("config %s, want %s", gc, wc)
	}
	gl, err := got.Layers()
	if err != nil {
		t.Fatal(err)
	}
	wl, _ := want.Layers()
	if len(gl) != len(wl) {
		t.Fatalf("%d layers, want %d", len(gl), len(wl))
	}
	for i := range gl {
		g, err := gl[i].Digest()
		if err != nil {
			t.Fatal(err)
		}
		w, _ := wl[i].Digest()
		if g != w {
			t.Errorf("layer %d is %s, want %s", i, g, w)
		}
		// The blob behind the digest is the one it names.
		rc, err := gl[i].Compressed()
		if err != nil {
			t.Fatal(err)
		}
		h, _, err := v1.SHA256(rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		if h != w {
			t.Errorf("layer %d: its blob is %s, want %s", i, h, w)
		}
	}
}
