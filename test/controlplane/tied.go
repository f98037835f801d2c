package controlplane

import (
	"os/exec"
	"runtime"
	"testing"
)

// StartTied starts cmd so that, on Linux, the kernel kills it if the test
// process dies without stopping it (PR_SET_PDEATHSIG), and not before.
//
// The death signal fires when the parent *thread* exits, not the parent
// process, and the Go runtime retires a thread whenever a goroutine exits
// locked to it (the control plane's do when kube-apiserver is stopped). A
// child started from an ordinary goroutine could thus be killed at a
// random moment. So cmd is started from a goroutine locked to its thread,
// which keeps the thread until exited is closed; close it once the child
// has exited. Other Unix systems have no death signal: the child outlives a
// test process that dies.
func StartTied(cmd *exec.Cmd, exited <-chan struct{}) error {
	tieToParent(cmd)
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		<-exited
	}()
	return <-started
}

// StartTiedUntilCleanup is StartTied for a process that must not outlive
// t: when t ends, the process is killed and waited for, unless it was
// waited for already. It fails t if the process cannot start.
func StartTiedUntilCleanup(t testing.TB, cmd *exec.Cmd, exited <-chan struct{}) {
	t.Helper()
	if err := StartTied(cmd, exited); err != nil {
		t.Fatalf("start %s: %v", cmd.Path, err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
}
