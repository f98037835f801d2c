package controlplane

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

const helperEnv = "CONTROLPLANE_TEST_PDEATHSIG_HELPER"

// TestChildDiesWithParent SIGKILLs a process that started a child with
// startProcess (so Stop never runs) and expects the kernel to kill the
// child too.
func TestChildDiesWithParent(t *testing.T) {
	helper := exec.Command(os.Args[0], "-test.run=^TestPdeathsigHelper$")
	helper.Env = append(os.Environ(), helperEnv+"=1")
	helper.Stderr = os.Stderr
	out, err := helper.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = helper.Process.Kill(); _ = helper.Wait() })

	lines := bufio.NewScanner(out)
	child := 0
	for lines.Scan() {
		if rest, ok := strings.CutPrefix(lines.Text(), "child alive "); ok {
			if child, err = strconv.Atoi(rest); err != nil {
				t.Fatal(err)
			}
			break
		}
	}
	if child == 0 {
		t.Fatalf("helper did not report a live child (scan error %v)", lines.Err())
	}
	if err := helper.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = helper.Wait()

	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !processGone(child) {
		if time.Now().After(deadline) {
			t.Fatalf("child %d still running 10s after its parent was killed", child)
		}
		<-tick.C
	}
}

// TestPdeathsigHelper is the parent process for TestChildDiesWithParent;
// it does nothing in a normal run.
func TestPdeathsigHelper(t *testing.T) {
	if os.Getenv(helperEnv) != "1" {
		return
	}
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatal(err)
	}
	p, err := startProcess("sleep", sleep, []string{"600"}, os.Environ(), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	// Make the runtime retire OS threads (a goroutine that exits while
	// locked takes its thread with it). The child must survive this: only
	// the death of the whole process may kill it.
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() { runtime.LockOSThread() })
	}
	wg.Wait()
	if p.exited() || syscall.Kill(p.pid, 0) != nil {
		t.Fatalf("child died when the runtime retired threads: %v", p.err)
	}
	fmt.Printf("child alive %d\n", p.pid)
	<-p.done // until SIGKILLed by the test
	t.Fatalf("child exited: %v", p.err)
}

// processGone reports whether pid no longer runs: it does not exist or is a
// zombie waiting for a reaper (the child was re-parented after its parent
// died, and the new parent may not reap it at once).
func processGone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return errors.Is(err, os.ErrNotExist)
	}
	// Format: pid (comm) state ...; comm may contain spaces and parentheses.
	i := bytes.LastIndexByte(stat, ')')
	return i >= 0 && i+2 < len(stat) && stat[i+2] == 'Z'
}
