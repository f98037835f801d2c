package controlplane

import (
	"os/exec"
	"syscall"
)

// sysProcAttr puts the child in its own process group, so Stop can signal
// everything it spawned.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// tieToParent has the kernel SIGKILL cmd when its parent thread dies (see
// StartTied for why that thread is pinned).
func tieToParent(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
}
