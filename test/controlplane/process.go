package controlplane

import (
	"errors"
	"fmt"
	"io"
	"os/exec"
	"runtime"
	"syscall"
	"time"
)

// process is one running child. Its pid is also its process group id.
type process struct {
	name string
	pid  int
	done chan struct{} // closed once the child has exited and been reaped
	err  error         // result of Wait; read only after done is closed
}

// startProcess starts path as the leader of a new process group with stdout
// and stderr going to out.
//
// The child is started from a goroutine locked to its OS thread, and that
// goroutine stays alive (blocked in Wait) until the child has been reaped.
// This matters because PR_SET_PDEATHSIG fires when the parent *thread*
// exits, not the parent process: had the child been started from an
// ordinary goroutine, the Go runtime could later retire that thread (it
// does so when any goroutine exits while locked to it) and the child would
// be killed at a random moment. With the thread pinned, the signal fires
// only when the whole test process goes away. After Wait the goroutine
// exits still locked, so the runtime discards the thread, which is harmless
// then.
func startProcess(name, path string, args, env []string, out io.Writer) (*process, error) {
	cmd := exec.Command(path, args...)
	cmd.Env = env
	cmd.Stdout = out
	cmd.Stderr = out
	cmd.SysProcAttr = sysProcAttr()
	// out is not an *os.File, so Wait also waits for the goroutine copying
	// the pipe; do not let an inherited pipe hold Wait up forever.
	cmd.WaitDelay = 2 * time.Second

	p := &process{name: name, done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := cmd.Start(); err != nil {
			runtime.UnlockOSThread()
			started <- err
			return
		}
		p.pid = cmd.Process.Pid
		started <- nil
		p.err = cmd.Wait()
		close(p.done)
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("controlplane: starting %s: %w", name, err)
	}
	return p, nil
}

// exited reports whether the child has exited.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// exitError describes how the child ended; call only after done is closed.
func (p *process) exitError() error {
	if p.err == nil {
		return fmt.Errorf("%s exited with status 0", p.name)
	}
	return fmt.Errorf("%s exited: %w", p.name, p.err)
}

// stop sends SIGTERM to the child's process group, then SIGKILL if it is
// still running after grace, and returns once the child has been reaped.
func (p *process) stop(grace time.Duration) {
	if p.exited() {
		return
	}
	// The pid cannot have been reused: the child is not reaped until Wait
	// returns in startProcess, and done is not closed yet.
	p.signalGroup(syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.done:
		return
	case <-t.C:
	}
	p.signalGroup(syscall.SIGKILL)
	<-p.done
}

func (p *process) signalGroup(sig syscall.Signal) {
	if err := syscall.Kill(-p.pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		// Fall back to the leader alone; it is the one we wait for.
		_ = syscall.Kill(p.pid, sig)
	}
}
