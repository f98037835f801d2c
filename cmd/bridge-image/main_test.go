package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Every bad argument is reported at once, each naming its flag, with exit
// code 2.
func TestBadArgumentsNameTheFlag(t *testing.T) {
	required := []string{"-binary", "b", "-replica", "r", "-zoneinfo", "z", "-out", "o"}
	cases := []struct {
		name string
		args []string
		want []string
	}{
		{"none", nil, []string{"-binary is required", "-replica is required", "-zoneinfo is required", "-out is required"}},
		{"bad time", append(required, "-created", "yesterday"), []string{`-created "yesterday"`}},
		{"bad tag and time", append(required, "-tag", "Not A Name", "-created", "-1"), []string{`-tag "Not A Name"`, `-created "-1"`}},
		{"stray argument", append(required, "extra"), []string{"unexpected arguments"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(tc.args, &stdout, &stderr); code != 2 {
				t.Errorf("exit code %d, want 2", code)
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("stderr does not say %q:\n%s", w, stderr.String())
				}
			}
		})
	}
}

func TestMissingInputIsNamed(t *testing.T) {
	dir := t.TempDir()
	present := filepath.Join(dir, "present")
	if err := os.WriteFile(present, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "nothing")
	for _, flag := range []string{"-binary", "-replica", "-zoneinfo"} {
		t.Run(flag, func(t *testing.T) {
			args := []string{"-out", filepath.Join(dir, "image")}
			for _, f := range []string{"-binary", "-replica", "-zoneinfo"} {
				file := present
				if f == flag {
					file = missing
				}
				args = append(args, f, file)
			}
			var stdout, stderr bytes.Buffer
			code := run(args, &stdout, &stderr)
			if code != 1 || !strings.Contains(stderr.String(), flag+": ") || !strings.Contains(stderr.String(), missing) {
				t.Errorf("exit code %d, stderr %q; want 1 and a message naming %s and its file", code, stderr.String(), flag)
			}
		})
	}
}

func TestReplaceLayoutReplacesOnlyALayout(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	keep := filepath.Join(out, "precious")
	if err := os.WriteFile(keep, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	write := func(d string) error { return os.WriteFile(filepath.Join(d, "oci-layout"), []byte("{}"), 0o600) }
	if err := replaceLayout(out, write); err == nil || !strings.Contains(err.Error(), "not an OCI layout") {
		t.Fatalf("replaceLayout over a directory that is no layout: %v", err)
	}
	if _, err := os.Stat(keep); err != nil {
		t.Fatalf("the directory's file is gone: %v", err)
	}

	// A layout is replaced whole, and its files are readable by all.
	if err := os.Remove(keep); err != nil {
		t.Fatal(err)
	}
	if err := write(out); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(out, "stale-blob")
	if err := os.WriteFile(stale, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := replaceLayout(out, write); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("an earlier layout's file stayed: %v", err)
	}
	fi, err := os.Stat(filepath.Join(out, "oci-layout"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o644 {
		t.Errorf("oci-layout has mode %v, want 0644", fi.Mode().Perm())
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("%d entries beside the layout, want none: %v", len(entries)-1, entries)
	}
}
