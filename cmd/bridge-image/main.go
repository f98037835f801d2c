// Command bridge-image builds the bridge's container image without Docker,
// from the static bridge and replica binaries, and writes it as an OCI
// layout (and, if asked, as a tarball that `docker load` and `podman load`
// read). The
// image is the one the Dockerfile builds: see internal/image for what it
// holds and guarantees. `make image-oci` runs it.
//
//	bridge-image -binary .bin/linux/bridge -replica .bin/linux/replica \
//	    -zoneinfo $(go env GOROOT)/lib/time/zoneinfo.zip \
//	    -out .bin/image [-tar .bin/image.tar] [-tag ghcr.io/kubebus/bridge:dev] \
//	    [-version v0.1.0] [-revision <commit>] [-created <unix seconds>]
//
// It prints the image's digest. Exit codes: 0 when the image is written, 1
// when it could not be, 2 on a bad argument.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/kubebus/bridge/internal/image"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

type args struct {
	binary, replica, zoneinfo, out, tar string
	tag                                 name.Tag
	version, revision                   string
	created                             time.Time
}

func parse(argv []string, stderr io.Writer) (args, error) {
	var a args
	flags := flag.NewFlagSet("bridge-image", flag.ContinueOnError)
	flags.SetOutput(stderr)
	flags.StringVar(&a.binary, "binary", "", "the static bridge binary for Linux (required)")
	flags.StringVar(&a.replica, "replica", "", "the static replica binary for Linux, cmd/replica, for the bridge's architecture (required)")
	flags.StringVar(&a.zoneinfo, "zoneinfo", "", "the Go tree's lib/time/zoneinfo.zip (required)")
	flags.StringVar(&a.out, "out", "", "the directory to write the OCI layout in (required); an earlier layout there is replaced")
	flags.StringVar(&a.tar, "tar", "", "also write the image as a tarball for docker load or podman load")
	tag := flags.String("tag", "ghcr.io/kubebus/bridge:dev", "the image's name: in the layout's index and the tarball")
	flags.StringVar(&a.version, "version", "", "the org.opencontainers.image.version label, for example from git describe")
	flags.StringVar(&a.revision, "revision", "", "the org.opencontainers.image.revision label, the commit")
	created := flags.String("created", "", "the creation time, in seconds since 1970 (SOURCE_DATE_EPOCH); default 0, for reproducible builds")
	if err := flags.Parse(argv); err != nil {
		return a, err
	}
	var errs []error
	if flags.NArg() > 0 {
		errs = append(errs, fmt.Errorf("unexpected arguments %q", flags.Args()))
	}
	for _, f := range []struct{ flag, value string }{{"-binary", a.binary}, {"-replica", a.replica}, {"-zoneinfo", a.zoneinfo}, {"-out", a.out}} {
		if f.value == "" {
			errs = append(errs, fmt.Errorf("%s is required", f.flag))
		}
	}
	t, err := name.NewTag(*tag)
	if err != nil {
		errs = append(errs, fmt.Errorf("-tag %q: %w", *tag, err))
	}
	a.tag = t
	if *created != "" {
		sec, err := strconv.ParseInt(*created, 10, 64)
		if err != nil || sec < 0 {
			errs = append(errs, fmt.Errorf("-created %q: not a number of seconds since 1970", *created))
		}
		a.created = time.Unix(sec, 0).UTC()
	}
	return a, errors.Join(errs...)
}

func run(argv []string, stdout, stderr io.Writer) int {
	a, err := parse(argv, stderr)
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(stderr, "bridge-image: %v\n", err)
		}
		return 2
	}
	digest, err := build(a)
	if err != nil {
		fmt.Fprintf(stderr, "bridge-image: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "%s@%s written to %s\n", a.tag.Name(), digest, a.out)
	return 0
}

func build(a args) (string, error) {
	bin, err := os.ReadFile(a.binary)
	if err != nil {
		return "", fmt.Errorf("-binary: %w", err)
	}
	replica, err := os.ReadFile(a.replica)
	if err != nil {
		return "", fmt.Errorf("-replica: %w", err)
	}
	zi, err := os.ReadFile(a.zoneinfo)
	if err != nil {
		return "", fmt.Errorf("-zoneinfo: %w", err)
	}
	img, err := image.Build(image.Options{
		Binary: bin, Replica: replica, ZoneInfo: zi, Version: a.version, Revision: a.revision, Created: a.created,
	})
	if err != nil {
		return "", err
	}
	digest, err := img.Digest()
	if err != nil {
		return "", err
	}
	if err := replaceLayout(a.out, func(dir string) error {
		return image.WriteLayout(dir, img, a.tag.Name())
	}); err != nil {
		return "", err
	}
	if a.tar != "" {
		if err := tarball.WriteToFile(a.tar, a.tag, img); err != nil {
			return "", fmt.Errorf("-tar: %w", err)
		}
	}
	return digest.String(), nil
}

// replaceLayout writes a layout in a new directory beside out, then puts it
// in out's place, so that out never holds a half-written layout or the
// blobs of an earlier image. It replaces only an OCI layout.
func replaceLayout(out string, write func(dir string) error) error {
	if _, err := os.Stat(out); err == nil {
		if _, err := os.Stat(filepath.Join(out, "oci-layout")); err != nil {
			return fmt.Errorf("-out %s exists and is not an OCI layout; not replacing it", out)
		}
	}
	parent := filepath.Dir(out)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return fmt.Errorf("-out: %w", err)
	}
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(out)+"-")
	if err != nil {
		return fmt.Errorf("-out: %w", err)
	}
	defer os.RemoveAll(tmp)
	if err := write(tmp); err != nil {
		return err
	}
	// Readable by all, as a build output is: the layout's writer keeps
	// some files to their owner.
	if err := filepath.WalkDir(tmp, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		mode := fs.FileMode(0o644)
		if d.IsDir() {
			mode = 0o755
		}
		return os.Chmod(p, mode)
	}); err != nil {
		return fmt.Errorf("-out: %w", err)
	}
	if err := os.RemoveAll(out); err != nil {
		return fmt.Errorf("-out: removing the earlier layout: %w", err)
	}
	if err := os.Rename(tmp, out); err != nil {
		return fmt.Errorf("-out: %w", err)
	}
	return nil
}
