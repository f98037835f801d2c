package image

import (
	"bytes"
	"crypto/x509"
	"debug/elf"
	"encoding/pem"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"golang.org/x/crypto/x509roots/fallback/bundle"
)

// The image's static binary passing these checks is proved by the image's
// own test (test/image), which builds the bridge; here, what they refuse.
func TestCheckStaticRefuses(t *testing.T) {
	// The host's shell is linked against a libc: glibc or musl alike ask
	// for a loader.
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Fatal(err)
	}
	sh, err = filepath.EvalSymlinks(sh)
	if err != nil {
		t.Fatal(err)
	}
	dynamic, err := os.ReadFile(sh)
	if err != nil {
		t.Fatal(err)
	}
	freebsd := append([]byte(nil), dynamic...)
	freebsd[7] = byte(elf.ELFOSABI_FREEBSD) // EI_OSABI
	for _, tc := range []struct {
		name, want string
		data       []byte
	}{
		{"a script", "is not an ELF file", []byte("#!/bin/sh\necho hi\n")},
		{"empty", "is not an ELF file", nil},
		{"a dynamic executable", "is not static", dynamic},
		{"an executable for FreeBSD", "is not a Linux executable", freebsd},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := CheckStatic(bytes.NewReader(tc.data))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("CheckStatic: %v, want an error saying %q", err, tc.want)
			}
			// As either binary of the image, beside one that passes: the
			// error names which binary it is, and what is wrong.
			for _, bin := range []struct{ path, missing string }{{"/bridge", "no bridge binary"}, {"/replica", "no replica binary"}} {
				o := Options{Binary: static(t), Replica: static(t), ZoneInfo: []byte("x")}
				if bin.path == "/bridge" {
					o.Binary = tc.data
				} else {
					o.Replica = tc.data
				}
				want := bin.path + ": the binary " + tc.want
				if len(tc.data) == 0 {
					want = bin.missing
				}
				if _, err := Build(o); err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("Build with it as %s: %v, want an error saying %q", bin.path, err, want)
				}
			}
		})
	}
}

func TestCABundleLeavesOutConstrainedRoots(t *testing.T) {
	pemFile, n := caBundle()
	in := map[string]bool{}
	rest := pemFile
	for {
		var blk *pem.Block
		blk, rest = pem.Decode(rest)
		if blk == nil {
			break
		}
		if _, err := x509.ParseCertificate(blk.Bytes); err != nil {
			t.Fatalf("a root does not parse: %v", err)
		}
		in[string(blk.Bytes)] = true
	}
	if len(in) != n || n == 0 {
		t.Fatalf("%d roots in the PEM file, %d counted", len(in), n)
	}
	all, constrained := 0, 0
	for r := range bundle.Roots() {
		all++
		if r.Constraint != nil {
			constrained++
			if in[string(r.Certificate)] {
				t.Error("a root with a distrust-after date is in the PEM file")
			}
		} else if !in[string(r.Certificate)] {
			t.Error("an unconstrained root is missing from the PEM file")
		}
	}
	t.Logf("%d roots, %d left out for a distrust-after date", all, constrained)
}

func TestBuildNamesWhatIsMissing(t *testing.T) {
	if _, err := Build(Options{Replica: []byte("x")}); err == nil || !strings.Contains(err.Error(), "no bridge binary") {
		t.Errorf("Build without a bridge: %v", err)
	}
	if _, err := Build(Options{Binary: []byte("x")}); err == nil || !strings.Contains(err.Error(), "no replica binary") {
		t.Errorf("Build without a replica: %v", err)
	}
}

// Both binaries must run on the image's one platform.
func TestBuildRefusesTwoArchitectures(t *testing.T) {
	amd64 := static(t)
	arm64 := append([]byte(nil), amd64...)
	// e_machine, little-endian at offset 18 of an ELF64 header.
	arm64[18], arm64[19] = byte(elf.EM_AARCH64), byte(elf.EM_AARCH64>>8)
	if arch, err := CheckStatic(bytes.NewReader(arm64)); err != nil || arch != "arm64" {
		t.Fatalf("the edited binary: %q, %v; want arm64", arch, err)
	}
	_, err := Build(Options{Binary: amd64, Replica: arm64, ZoneInfo: []byte("x")})
	if err == nil || !strings.Contains(err.Error(), "/replica is for arm64, /bridge for amd64") {
		t.Errorf("Build with binaries for two architectures: %v", err)
	}
}

// static is a static Linux executable for amd64, a program that does
// nothing, built once.
func static(t *testing.T) []byte {
	t.Helper()
	staticOnce.Do(func() { staticBin, staticErr = buildStatic() })
	if staticErr != nil {
		t.Fatal(staticErr)
	}
	return staticBin
}

var (
	staticOnce sync.Once
	staticBin  []byte
	staticErr  error
)

func buildStatic() ([]byte, error) {
	dir, err := os.MkdirTemp("", "image-static-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	src := filepath.Join(dir, "main.go")
	if err := os.WriteFile(src, []byte("package main\n\nfunc main() {}\n"), 0o644); err != nil {
		return nil, err
	}
	out := filepath.Join(dir, "static")
	cmd := exec.Command("go", "build", "-o", out, src)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64", "GO111MODULE=off")
	if msg, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("building a static program: %v\n%s", err, msg)
	}
	return os.ReadFile(out)
}
