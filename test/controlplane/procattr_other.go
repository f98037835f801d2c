//go:build unix && !linux

package controlplane

import "syscall"

// sysProcAttr puts the child in its own process group. There is no
// parent-death signal outside Linux: a test process that dies without
// calling Stop leaves its children running.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
