//go:build unix && !linux

package controlplane

import (
	"os/exec"
	"syscall"
)

// sysProcAttr puts the child in its own process group.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// tieToParent does nothing: there is no parent-death signal outside Linux,
// so a test process that dies without calling Stop leaves its children
// running.
func tieToParent(*exec.Cmd) {}
