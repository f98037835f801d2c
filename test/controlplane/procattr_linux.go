package controlplane

import "syscall"

// sysProcAttr puts the child in its own process group, so Stop can signal
// everything it spawned, and has the kernel SIGKILL it if its parent thread
// dies (see startProcess for why that thread is pinned).
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
