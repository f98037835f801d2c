package image

import (
	"bytes"
	"crypto/x509"
	"debug/elf"
	"encoding/pem"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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
		{"a script", "not an ELF file", []byte("#!/bin/sh\necho hi\n")},
		{"empty", "not an ELF file", nil},
		{"a dynamic executable", "is not static", dynamic},
		{"an executable for FreeBSD", "not a Linux executable", freebsd},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := CheckStatic(bytes.NewReader(tc.data))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("CheckStatic: %v, want an error saying %q", err, tc.want)
			}
			if _, err := Build(Options{Binary: tc.data, ZoneInfo: []byte("x")}); err == nil {
				t.Fatal("Build took it")
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
	if _, err := Build(Options{}); err == nil || !strings.Contains(err.Error(), "no bridge binary") {
		t.Errorf("Build without a binary: %v", err)
	}
}
