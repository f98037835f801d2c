package image

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The accounts distroless static has, with no login shell: there is none.
const (
	passwd = "root:x:0:0:root:/root:/sbin/nologin\n" +
		"nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n" +
		"nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"
	group = "root:x:0:\n" +
		"nobody:x:65534:\n" +
		"tty:x:5:\n" +
		"staff:x:50:\n" +
		"nonroot:x:65532:\n"
	// Go's resolver reads it: hosts files first, then DNS, as glibc would.
	nsswitch = "hosts: files dns\n"
)

// A tree is a layer's files, written in the order they are added, each
// with the same time, so that the same files give the same layer digest.
type tree struct {
	buf   bytes.Buffer
	tw    *tar.Writer
	mtime time.Time
	dirs  map[string]bool
	err   error
}

func newTree(mtime time.Time) *tree {
	t := &tree{mtime: mtime, dirs: map[string]bool{}}
	t.tw = tar.NewWriter(&t.buf)
	return t
}

// dir adds a directory, and those above it that are not there yet (0755,
// root's).
func (t *tree) dir(name string, mode int64, uid int) {
	if t.dirs[name] {
		return
	}
	if parent := path.Dir(name); parent != "." {
		t.dir(parent, 0o755, 0)
	}
	t.dirs[name] = true
	t.add(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: mode, Uid: uid, Gid: uid}, nil)
}

// file adds a regular file, and the directories above it.
func (t *tree) file(name string, mode int64, uid int, data []byte) {
	if parent := path.Dir(name); parent != "." {
		t.dir(parent, 0o755, 0)
	}
	t.add(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Uid: uid, Gid: uid, Size: int64(len(data))}, data)
}

func (t *tree) add(h *tar.Header, data []byte) {
	if t.err != nil {
		return
	}
	h.ModTime = t.mtime
	h.Format = tar.FormatPAX
	if err := t.tw.WriteHeader(h); err != nil {
		t.err = err
		return
	}
	_, t.err = t.tw.Write(data)
}

// layer closes the tree and returns it as a gzipped OCI layer.
func (t *tree) layer() (v1.Layer, error) {
	if t.err == nil {
		t.err = t.tw.Close()
	}
	if t.err != nil {
		return nil, fmt.Errorf("image: writing a layer: %w", t.err)
	}
	data := t.buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithMediaType(types.OCILayer), tarball.WithCompressedCaching)
}

// baseTree is what distroless static nonroot gives a static binary:
// accounts, CA roots, time zones, a home for nonroot and a /tmp.
func baseTree(mtime time.Time, zoneinfo []byte) (*tree, error) {
	t := newTree(mtime)
	t.file("etc/group", 0o644, 0, []byte(group))
	t.file("etc/nsswitch.conf", 0o644, 0, []byte(nsswitch))
	t.file("etc/passwd", 0o644, 0, []byte(passwd))
	certs, _ := caBundle()
	t.file(CABundlePath[1:], 0o644, 0, certs)
	t.dir("home/nonroot", 0o700, NonRoot)
	t.dir("root", 0o700, 0)
	t.dir("tmp", 0o1777, 0)
	if err := addZoneInfo(t, zoneinfo); err != nil {
		return nil, err
	}
	return t, nil
}

// addZoneInfo unpacks Go's zoneinfo.zip into usr/share/zoneinfo, where Go's
// time package looks first.
func addZoneInfo(t *tree, zipped []byte) error {
	zr, err := zip.NewReader(bytes.NewReader(zipped), int64(len(zipped)))
	if err != nil {
		return fmt.Errorf("image: the time zone database is not a zip file: %w", err)
	}
	files := make([]*zip.File, 0, len(zr.File))
	for _, f := range zr.File {
		if !f.FileInfo().IsDir() {
			files = append(files, f)
		}
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Name < files[j].Name })
	for _, f := range files {
		name := path.Clean(f.Name)
		if path.IsAbs(name) || strings.HasPrefix(name, "..") {
			return fmt.Errorf("image: the time zone database holds an unsafe name %q", f.Name)
		}
		rc, err := f.Open()
		if err != nil {
			return fmt.Errorf("image: the time zone database: %s: %w", f.Name, err)
		}
		data, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			return fmt.Errorf("image: the time zone database: %s: %w", f.Name, err)
		}
		t.file(path.Join(ZoneInfoDir[1:], name), 0o644, 0, data)
	}
	return nil
}
