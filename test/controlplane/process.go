package controlplane

import (
	"errors"
	"fmt"
	"io"
	"os/exec"
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
// and stderr going to out, tied to the test process (see StartTied).
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
	if err := StartTied(cmd, p.done); err != nil {
		return nil, fmt.Errorf("controlplane: starting %s: %w", name, err)
	}
	p.pid = cmd.Process.Pid
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
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
