// Package version tells which build of the bridge is running: the module
// version and the VCS revision that the Go toolchain stamps into every
// binary it builds from a checkout. Nothing is set by hand or by linker
// flags, so a binary cannot claim a revision it was not built from.
package version

import (
	"fmt"
	"runtime/debug"
)

// Info is what the build stamped into the binary.
type Info struct {
	// Version is the main module's version: a tag, a pseudo-version, or
	// "(devel)" for a build from a checkout.
	Version string
	// Revision is the VCS revision the binary was built from, "" when the
	// build had none (go run, a build outside a checkout, -buildvcs=false).
	Revision string
	// Modified is true when the checkout had changes that were not
	// committed.
	Modified bool
	// GoVersion is the Go toolchain that built it.
	GoVersion string
}

// Read returns what the running binary's build info holds.
func Read() Info {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return Info{Version: "unknown"}
	}
	info := Info{Version: bi.Main.Version, GoVersion: bi.GoVersion}
	if info.Version == "" {
		info.Version = "unknown"
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			info.Revision = s.Value
		case "vcs.modified":
			info.Modified = s.Value == "true"
		}
	}
	return info
}

// String is "<version>, revision <revision>[ (modified)], <go version>".
func (i Info) String() string {
	rev := i.Revision
	if rev == "" {
		rev = "unknown"
	}
	if i.Modified {
		rev += " (modified)"
	}
	return fmt.Sprintf("%s, revision %s, %s", i.Version, rev, i.GoVersion)
}
