package version

import (
	"runtime"
	"strings"
	"testing"
)

func TestReadTellsTheToolchain(t *testing.T) {
	info := Read()
	if info.GoVersion != runtime.Version() {
		t.Errorf("Go version %q, want the running toolchain's %q", info.GoVersion, runtime.Version())
	}
	if info.Version == "" {
		t.Error("no version: want the module's, or unknown")
	}
}

func TestString(t *testing.T) {
	for _, tc := range []struct {
		info Info
		want string
	}{
		{Info{Version: "v1.2.3", Revision: "abc123", GoVersion: "go1.26.8"}, "v1.2.3, revision abc123, go1.26.8"},
		{Info{Version: "(devel)", Revision: "abc123", Modified: true, GoVersion: "go1.26.8"}, "(devel), revision abc123 (modified), go1.26.8"},
		{Info{Version: "(devel)", GoVersion: "go1.26.8"}, "(devel), revision unknown, go1.26.8"},
	} {
		if got := tc.info.String(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.info, got, tc.want)
		}
		if !strings.Contains(tc.info.String(), tc.info.GoVersion) {
			t.Errorf("%+v: no Go version in %q", tc.info, tc.info.String())
		}
	}
}
