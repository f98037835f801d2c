// Package image tests the bridge's container image as `make image-oci`
// builds it, without Docker, and holds it to the Dockerfile.
//
// What the tests establish, on the image read back from its OCI layout:
//   - it is a valid OCI image whose layers match their digests, built the
//     same byte for byte twice from the same inputs;
//   - it holds /bridge and /replica, the very binaries built with the
//     Dockerfile's flags (which make uses too), each in a layer of its own
//     after the base, in the order of the Dockerfile's COPY lines; both
//     are static (no loader, no shared library), root's and 0755;
//   - its entrypoint is the bridge; run from the image's filesystem
//     (chrooted, as 65532:65532, with the image's environment and working
//     directory) each binary prints its usage;
//   - it runs as 65532:65532, a user that /etc/passwd names, from a home
//     that user owns, and has no shell and no other executable;
//   - its labels are the OCI ones the Dockerfile sets, and its user, port,
//     entrypoint and binary paths are the Dockerfile's; its user and port
//     are the chart's defaults, and the chart runs the replica by the path
//     the image holds it at;
//   - it carries CA roots that parse, /etc/passwd and /etc/group owned by
//     root and readable by all, and a time zone database Go can load;
//   - pushed to a registry and pulled back, it keeps its digest; the
//     tarball for docker load holds the same config and layers.
package image

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/validate"
	"k8s.io/apimachinery/pkg/util/yaml"

	bridgeimage "github.com/kubebus/bridge/internal/image"
)

func TestImage(t *testing.T) {
	b := buildImage(t)

	t.Run("valid OCI image in the layout", func(t *testing.T) {
		// The layers' digests are checked as the filesystem is read.
		if err := validate.Image(b.img, validate.Fast); err != nil {
			t.Fatalf("the image does not validate: %v", err)
		}
		mt, _ := b.img.MediaType()
		if mt != "application/vnd.oci.image.manifest.v1+json" {
			t.Errorf("manifest media type %q, want the OCI one", mt)
		}
		if b.cfg.OS != "linux" || b.cfg.Architecture != b.goarch {
			t.Errorf("platform %s/%s, want linux/%s, the binary's", b.cfg.OS, b.cfg.Architecture, b.goarch)
		}
		if got := b.cfg.Created.UTC().Format(time.RFC3339); got != "2023-11-14T22:13:20Z" {
			t.Errorf("created %s, want the time passed with -created", got)
		}
	})

	t.Run("reproducible", func(t *testing.T) {
		again := filepath.Join(t.TempDir(), "image")
		runTool(t, b, again)
		want, _ := b.img.Digest()
		if got := layoutImage(t, again); mustDigest(t, got) != want {
			t.Errorf("a second build gives %s, the first gave %s", mustDigest(t, got), want)
		}
	})

	t.Run("entrypoint is the bridge", func(t *testing.T) {
		if !slices.Equal(b.cfg.Config.Entrypoint, []string{"/bridge"}) || len(b.cfg.Config.Cmd) != 0 {
			t.Fatalf("entrypoint %q cmd %q, want [/bridge] and no cmd", b.cfg.Config.Entrypoint, b.cfg.Config.Cmd)
		}
	})

	dests := []string{"/bridge", "/replica"}
	t.Run("the bridge and the replica, static, as built", func(t *testing.T) {
		var got []string
		for _, bin := range b.binaries {
			got = append(got, bin.dest)
		}
		if !slices.Equal(got, dests) {
			t.Fatalf("the Dockerfile copies %q into the image, want %q", got, dests)
		}
		for _, bin := range b.binaries {
			t.Run(bin.dest, func(t *testing.T) {
				e, ok := b.files[bin.dest]
				if !ok || e.hdr.Typeflag != tar.TypeReg {
					t.Fatalf("%s is not a regular file in the image", bin.dest)
				}
				// 0755 and root's: nonroot, neither owner nor in the group,
				// runs it by the bits for others, and cannot change it.
				if e.hdr.Mode&0o7777 != 0o755 || e.hdr.Uid != 0 || e.hdr.Gid != 0 {
					t.Errorf("%s mode %o owner %d:%d, want 755 root:root (nonroot may run it, not change it)", bin.dest, e.hdr.Mode, e.hdr.Uid, e.hdr.Gid)
				}
				want, err := os.ReadFile(bin.built)
				if err != nil {
					t.Fatal(err)
				}
				if sha256.Sum256(e.data) != sha256.Sum256(want) {
					t.Errorf("%s in the image is not %s as built", bin.dest, bin.pkg)
				}
				arch, err := bridgeimage.CheckStatic(bytes.NewReader(e.data))
				if err != nil {
					t.Fatal(err)
				}
				if arch != b.cfg.Architecture {
					t.Errorf("%s is for %s, the image says %s", bin.dest, arch, b.cfg.Architecture)
				}
				t.Logf("%s: %d bytes", bin.dest, len(e.data))
			})
		}
	})

	t.Run("a layer per binary, after the base", func(t *testing.T) {
		if len(b.layers) != 1+len(b.binaries) {
			t.Fatalf("%d layers, want the base and one per binary the Dockerfile copies (%d)", len(b.layers), len(b.binaries))
		}
		layers, err := b.img.Layers()
		if err != nil {
			t.Fatal(err)
		}
		var history []v1.History
		for _, h := range b.cfg.History {
			if !h.EmptyLayer {
				history = append(history, h)
			}
		}
		if len(history) != len(layers) {
			t.Fatalf("%d history entries with a layer, %d layers", len(history), len(layers))
		}
		for i, bin := range b.binaries {
			l := i + 1
			if !slices.Equal(b.layers[l], []string{bin.dest}) {
				t.Errorf("layer %d holds %q, want %s alone", l, b.layers[l], bin.dest)
			}
			if want := "COPY " + path.Base(bin.dest) + " " + bin.dest; history[l].CreatedBy != want {
				t.Errorf("layer %d was created by %q, want %q", l, history[l].CreatedBy, want)
			}
			size, err := layers[l].Size()
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("layer %d, %s: %d bytes compressed", l, bin.dest, size)
		}
		size, err := layers[0].Size()
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("layer 0, the base: %d bytes compressed", size)
	})

	t.Run("the binaries run from the image as nonroot", func(t *testing.T) {
		rootfs := unpack(t, b.files)
		for _, tc := range []struct {
			dest string
			want []string
		}{
			{"/bridge", []string{"configured only through environment variables", "BRIDGE_RESOURCES", "BRIDGE_CHECKPOINT"}},
			{"/replica", []string{"configured only through environment variables", "REPLICA_BUS", "REPLICA_TLS_CERT_FILE", "REPLICA_RULES_FILE"}},
		} {
			t.Run(tc.dest, func(t *testing.T) {
				out, err := runInImage(t, rootfs, b.cfg, tc.dest, "--help")
				if err != nil {
					t.Fatalf("%s --help: %v\n%s", tc.dest, err, out)
				}
				for _, want := range tc.want {
					if !bytes.Contains(out, []byte(want)) {
						t.Errorf("%s --help does not print %q:\n%s", tc.dest, want, out)
					}
				}
			})
		}
	})

	t.Run("non-root user with a home", func(t *testing.T) {
		if b.cfg.Config.User != "65532:65532" {
			t.Fatalf("user %q, want 65532:65532", b.cfg.Config.User)
		}
		var user []string
		for line := range strings.SplitSeq(string(b.files["/etc/passwd"].data), "\n") {
			if f := strings.Split(line, ":"); len(f) == 7 && f[2] == "65532" {
				user = f
			}
		}
		if user == nil || user[0] != "nonroot" || user[3] != "65532" {
			t.Fatalf("/etc/passwd has no nonroot user 65532 with group 65532: %v", user)
		}
		if !strings.Contains(string(b.files["/etc/group"].data), "\nnonroot:x:65532:\n") {
			t.Errorf("/etc/group has no nonroot group 65532:\n%s", b.files["/etc/group"].data)
		}
		home := user[5]
		if b.cfg.Config.WorkingDir != home {
			t.Errorf("working directory %q, want nonroot's home %q (the default checkpoint file goes there)", b.cfg.Config.WorkingDir, home)
		}
		h, ok := b.files[home]
		if !ok || h.hdr.Typeflag != tar.TypeDir || h.hdr.Uid != 65532 || h.hdr.Gid != 65532 || h.hdr.Mode&0o700 != 0o700 {
			t.Errorf("%s is not a directory nonroot owns and may write: %+v", home, h.hdr)
		}
		if tmp := b.files["/tmp"]; tmp.hdr == nil || tmp.hdr.Mode&0o7777 != 0o1777 {
			t.Errorf("/tmp is not a sticky directory for everyone: %+v", tmp.hdr)
		}
	})

	t.Run("no shell and no other executable", func(t *testing.T) {
		for p, e := range b.files {
			switch filepath.Base(p) {
			case "sh", "bash", "ash", "dash", "zsh", "busybox", "nologin":
				t.Errorf("the image has %s", p)
			}
			if e.hdr.Typeflag == tar.TypeSymlink || e.hdr.Typeflag == tar.TypeLink {
				t.Errorf("the image has a link %s -> %s", p, e.hdr.Linkname)
			}
			if e.hdr.Typeflag == tar.TypeReg && e.hdr.Mode&0o111 != 0 && !slices.Contains(dests, p) {
				t.Errorf("the image has another executable, %s", p)
			}
		}
		if _, ok := b.files["/bin/sh"]; ok {
			t.Error("the image has /bin/sh")
		}
	})

	t.Run("files distroless gives", func(t *testing.T) {
		for _, p := range []string{"/etc/passwd", "/etc/group", "/etc/nsswitch.conf", "/etc/ssl/certs/ca-certificates.crt"} {
			e, ok := b.files[p]
			if !ok {
				t.Errorf("no %s", p)
				continue
			}
			if e.hdr.Typeflag != tar.TypeReg || e.hdr.Mode&0o7777 != 0o644 || e.hdr.Uid != 0 || e.hdr.Gid != 0 {
				t.Errorf("%s: type %c mode %o owner %d:%d, want a file, 644, root:root", p, e.hdr.Typeflag, e.hdr.Mode, e.hdr.Uid, e.hdr.Gid)
			}
		}
		if !slices.Contains(b.cfg.Config.Env, "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt") {
			t.Errorf("env %q does not name the CA bundle", b.cfg.Config.Env)
		}
	})

	t.Run("CA roots", func(t *testing.T) {
		rest := b.files["/etc/ssl/certs/ca-certificates.crt"].data
		var subjects []string
		for {
			var blk *pem.Block
			blk, rest = pem.Decode(rest)
			if blk == nil {
				break
			}
			c, err := x509.ParseCertificate(blk.Bytes)
			if err != nil {
				t.Fatalf("a root does not parse: %v", err)
			}
			if !c.IsCA {
				t.Errorf("%s is not a CA", c.Subject)
			}
			subjects = append(subjects, c.Subject.CommonName)
		}
		if len(bytes.TrimSpace(rest)) != 0 {
			t.Error("the CA bundle has bytes that are not PEM")
		}
		if len(subjects) < 100 {
			t.Errorf("%d roots, want Mozilla's (over 100)", len(subjects))
		}
		for _, cn := range []string{"ISRG Root X1", "DigiCert Global Root G2"} {
			if !slices.Contains(subjects, cn) {
				t.Errorf("no %s among the roots", cn)
			}
		}
		t.Logf("%d CA roots", len(subjects))
	})

	t.Run("time zones", func(t *testing.T) {
		n := 0
		for p := range b.files {
			if strings.HasPrefix(p, "/usr/share/zoneinfo/") && b.files[p].hdr.Typeflag == tar.TypeReg {
				n++
			}
		}
		for _, zone := range []string{"UTC", "Europe/Paris", "America/Los_Angeles"} {
			e, ok := b.files["/usr/share/zoneinfo/"+zone]
			if !ok {
				t.Errorf("no time zone %s", zone)
				continue
			}
			if _, err := time.LoadLocationFromTZData(zone, e.data); err != nil {
				t.Errorf("time zone %s: %v", zone, err)
			}
		}
		t.Logf("%d time zone files", n)
	})

	t.Run("agrees with the Dockerfile", func(t *testing.T) {
		d := b.final
		if d.from != "gcr.io/distroless/static-debian12:nonroot" {
			t.Errorf("the Dockerfile's base is %s: the image builder gives what distroless static nonroot has; make them agree", d.from)
		}
		if d.user != b.cfg.Config.User {
			t.Errorf("Dockerfile USER %q, image %q", d.user, b.cfg.Config.User)
		}
		if !slices.Equal(d.entrypoint, b.cfg.Config.Entrypoint) {
			t.Errorf("Dockerfile ENTRYPOINT %q, image %q", d.entrypoint, b.cfg.Config.Entrypoint)
		}
		// buildImage found each COPY's source among the build's outputs.
		if !slices.ContainsFunc(d.copies, func(c copyInstr) bool { return c.dest == b.cfg.Config.Entrypoint[0] }) {
			t.Errorf("Dockerfile copies %+v, none to the entrypoint %s", d.copies, b.cfg.Config.Entrypoint[0])
		}
		var ports []string
		for _, p := range d.expose {
			if !strings.Contains(p, "/") {
				p += "/tcp"
			}
			ports = append(ports, p)
		}
		var imagePorts []string
		for p := range b.cfg.Config.ExposedPorts {
			imagePorts = append(imagePorts, p)
		}
		slices.Sort(ports)
		slices.Sort(imagePorts)
		if !slices.Equal(ports, imagePorts) {
			t.Errorf("Dockerfile EXPOSE %q, image %q", ports, imagePorts)
		}
		passed := map[string]string{"VERSION": version, "REVISION": revision}
		for k, v := range d.labels {
			if arg, ok := strings.CutPrefix(v, "${"); ok {
				arg = strings.TrimSuffix(arg, "}")
				if !slices.Contains(d.args, arg) {
					t.Errorf("LABEL %s uses %s, which is no ARG of the stage", k, arg)
				}
				v = passed[arg]
			}
			if got := b.cfg.Config.Labels[k]; got != v {
				t.Errorf("label %s: Dockerfile %q, image %q", k, v, got)
			}
		}
		for k := range b.cfg.Config.Labels {
			if _, ok := d.labels[k]; !ok {
				t.Errorf("label %s is in the image, not in the Dockerfile", k)
			}
			if !strings.HasPrefix(k, "org.opencontainers.image.") {
				t.Errorf("label %s does not follow the OCI conventions", k)
			}
		}
		for _, k := range []string{"title", "description", "source", "version", "revision"} {
			if b.cfg.Config.Labels["org.opencontainers.image."+k] == "" {
				t.Errorf("no org.opencontainers.image.%s label", k)
			}
		}
		// make passes each ARG the labels use, to docker and to the builder.
		image, err := makeRecipe(makefile, "image")
		if err != nil {
			t.Fatal(err)
		}
		oci, err := makeRecipe(makefile, "image-oci")
		if err != nil {
			t.Fatal(err)
		}
		for _, arg := range d.args {
			if !strings.Contains(strings.Join(image, " "), "--build-arg "+arg+"=$("+arg+")") {
				t.Errorf("make image does not pass --build-arg %s", arg)
			}
			if !strings.Contains(strings.Join(oci, " "), "-"+strings.ToLower(arg)+` "$(`+arg+`)"`) {
				t.Errorf("make image-oci does not pass -%s", strings.ToLower(arg))
			}
		}
	})

	t.Run("agrees with the chart's defaults", func(t *testing.T) {
		data, err := os.ReadFile(chartValues)
		if err != nil {
			t.Fatal(err)
		}
		var values struct {
			PodSecurityContext struct {
				RunAsUser, RunAsGroup int
			} `json:"podSecurityContext"`
			Metrics struct {
				Port int
			} `json:"metrics"`
		}
		if err := yaml.Unmarshal(data, &values); err != nil {
			t.Fatalf("%s: %v", chartValues, err)
		}
		psc := values.PodSecurityContext
		if got := fmt.Sprintf("%d:%d", psc.RunAsUser, psc.RunAsGroup); got != b.cfg.Config.User {
			t.Errorf("the chart runs the pod as %s, the image as %s", got, b.cfg.Config.User)
		}
		if _, ok := b.cfg.Config.ExposedPorts[fmt.Sprintf("%d/tcp", values.Metrics.Port)]; !ok {
			t.Errorf("the chart serves metrics on %d, the image exposes %v", values.Metrics.Port, b.cfg.Config.ExposedPorts)
		}
		// The replica's pod runs the image with the replica as its command.
		tmpl, err := os.ReadFile(chartReplica)
		if err != nil {
			t.Fatal(err)
		}
		var command []string
		for line := range strings.Lines(string(tmpl)) {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "command:"); ok {
				if err := json.Unmarshal([]byte(strings.TrimSpace(v)), &command); err != nil {
					t.Fatalf("%s: command %s is not a JSON list: %v", chartReplica, v, err)
				}
			}
		}
		if len(command) != 1 || command[0] != bridgeimage.ReplicaPath {
			t.Errorf("the chart runs the replica as %q, the image holds it at %s", command, bridgeimage.ReplicaPath)
		}
	})

	t.Run("tarball for docker load", func(t *testing.T) {
		ref, err := name.NewTag(tag)
		if err != nil {
			t.Fatal(err)
		}
		loaded, err := tarball.ImageFromPath(b.tar, &ref)
		if err != nil {
			t.Fatal(err)
		}
		if err := validate.Image(loaded, validate.Fast); err != nil {
			t.Fatalf("the tarball's image does not validate: %v", err)
		}
		sameConfigAndLayers(t, loaded, b.img)
	})

	t.Run("push to a registry and pull back", func(t *testing.T) {
		srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
		defer srv.Close()
		ref, err := name.ParseReference(strings.TrimPrefix(srv.URL, "http://") + "/kubebus/bridge:test")
		if err != nil {
			t.Fatal(err)
		}
		if err := remote.Write(ref, b.img); err != nil {
			t.Fatalf("push: %v", err)
		}
		desc, err := remote.Get(ref)
		if err != nil {
			t.Fatalf("pull: %v", err)
		}
		if want := mustDigest(t, b.img); desc.Digest != want {
			t.Errorf("the registry serves %s, the layout holds %s", desc.Digest, want)
		}
		pulled, err := desc.Image()
		if err != nil {
			t.Fatal(err)
		}
		if err := validate.Image(pulled, validate.Fast); err != nil {
			t.Fatalf("the pulled image does not validate: %v", err)
		}
		sameConfigAndLayers(t, pulled, b.img)
	})
}
