package image

import (
	"bytes"
	"errors"
	"fmt"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// What the image runs, and as whom: the Dockerfile says the same.
const (
	// Entrypoint is the bridge binary's path in the image.
	Entrypoint = "/bridge"
	// ReplicaPath is the replica binary's path in the image; a pod that
	// runs the replica names it as its command.
	ReplicaPath = "/replica"
	// NonRoot is the uid and gid of the user "nonroot".
	NonRoot = 65532
	// User is the image's user, by number so that Kubernetes can check
	// runAsNonRoot.
	User = "65532:65532"
	// Home is nonroot's home and the image's working directory: the
	// default checkpoint file, bridge-checkpoint.db, is written there.
	Home = "/home/nonroot"
	// Port is the metrics and probes port.
	Port = "9090/tcp"
	// CABundlePath is where Go's crypto/x509 looks first on Linux.
	CABundlePath = "/etc/ssl/certs/ca-certificates.crt"
	// ZoneInfoDir is where Go's time package looks first.
	ZoneInfoDir = "/usr/share/zoneinfo"
)

// env is distroless's: a PATH with nothing on it but the usual places, and
// the CA roots named for programs that do not look there on their own.
var env = []string{
	"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
	"SSL_CERT_FILE=" + CABundlePath,
}

// Options is what an image is built from.
type Options struct {
	// Binary is the bridge, a static Linux executable; its architecture is
	// the image's.
	Binary []byte
	// Replica is the replica (cmd/replica), a static Linux executable for
	// the bridge's architecture.
	Replica []byte
	// ZoneInfo is Go's time zone database, the Go tree's
	// lib/time/zoneinfo.zip.
	ZoneInfo []byte
	// Version and Revision label the image (org.opencontainers.image.version
	// and .revision, for example from git describe and git rev-parse). An
	// empty one leaves its label out.
	Version, Revision string
	// Created is the image's creation time and every file's. The zero time
	// stands for 1970-01-01, so that a build without it is reproducible;
	// the commit's time is a good choice.
	Created time.Time
}

// Labels returns the image's OCI labels for a version and a revision; the
// Dockerfile sets the same.
func Labels(version, revision string) map[string]string {
	l := map[string]string{
		"org.opencontainers.image.title":       "bridge",
		"org.opencontainers.image.description": "Change data capture for Kubernetes: publishes every change to API objects to NATS or Kafka.",
		"org.opencontainers.image.source":      "https://github.com/kubebus/bridge",
		"org.opencontainers.image.licenses":    "Apache-2.0",
	}
	if version != "" {
		l["org.opencontainers.image.version"] = version
	}
	if revision != "" {
		l["org.opencontainers.image.revision"] = revision
	}
	return l
}

// Build returns the bridge's image: three layers, the base (accounts, CA
// roots, time zones, directories), the bridge and the replica, one layer
// per binary as the Dockerfile's COPY lines make them, so that a new
// binary leaves the layers before it as they were.
func Build(o Options) (v1.Image, error) {
	arch, err := checkBinaries(o)
	if err != nil {
		return nil, err
	}
	if len(o.ZoneInfo) == 0 {
		return nil, errors.New("image: no time zone database (the Go tree's lib/time/zoneinfo.zip)")
	}
	created := o.Created.UTC()
	if created.IsZero() {
		created = time.Unix(0, 0).UTC()
	}

	base, err := baseTree(created, o.ZoneInfo)
	if err != nil {
		return nil, err
	}
	baseLayer, err := base.layer()
	if err != nil {
		return nil, err
	}
	when := v1.Time{Time: created}
	adds := []mutate.Addendum{{Layer: baseLayer, MediaType: types.OCILayer, History: v1.History{
		Created: when, CreatedBy: "accounts, CA roots, time zones, /home/nonroot and /tmp, as distroless static nonroot has them",
	}}}
	for _, b := range []struct {
		path string
		data []byte
	}{{Entrypoint, o.Binary}, {ReplicaPath, o.Replica}} {
		bin := newTree(created)
		bin.file(b.path[1:], 0o755, 0, b.data)
		l, err := bin.layer()
		if err != nil {
			return nil, err
		}
		adds = append(adds, mutate.Addendum{Layer: l, MediaType: types.OCILayer, History: v1.History{
			Created: when, CreatedBy: "COPY " + b.path[1:] + " " + b.path,
		}})
	}

	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err = mutate.Append(img, adds...)
	if err != nil {
		return nil, fmt.Errorf("image: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("image: %w", err)
	}
	cf = cf.DeepCopy()
	cf.Architecture = arch
	cf.OS = "linux"
	cf.Created = when
	cf.Config = v1.Config{
		Entrypoint:   []string{Entrypoint},
		User:         User,
		WorkingDir:   Home,
		Env:          append([]string(nil), env...),
		ExposedPorts: map[string]struct{}{Port: {}},
		Labels:       Labels(o.Version, o.Revision),
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("image: %w", err)
	}
	return img, nil
}

// checkBinaries returns the image's architecture, the bridge's, once both
// binaries are static Linux executables for it.
func checkBinaries(o Options) (arch string, err error) {
	if len(o.Binary) == 0 {
		return "", errors.New("image: no bridge binary")
	}
	if len(o.Replica) == 0 {
		return "", errors.New("image: no replica binary (cmd/replica)")
	}
	arch, err = checkStatic(bytes.NewReader(o.Binary))
	if err != nil {
		return "", fmt.Errorf("image: %s: %w", Entrypoint, err)
	}
	replicaArch, err := checkStatic(bytes.NewReader(o.Replica))
	if err != nil {
		return "", fmt.Errorf("image: %s: %w", ReplicaPath, err)
	}
	if replicaArch != arch {
		return "", fmt.Errorf("image: %s is for %s, %s for %s; build both with the same GOARCH", ReplicaPath, replicaArch, Entrypoint, arch)
	}
	return arch, nil
}
