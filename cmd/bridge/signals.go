package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"

	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
)

// exitQuit is the exit code after SIGQUIT: 128 + 3, what a shell reports
// for a process that SIGQUIT killed. Go's own handling of SIGQUIT exits
// with 2, the code of an invalid configuration.
const exitQuit = 128 + int(syscall.SIGQUIT)

// stopSignals stop the bridge gracefully. SIGHUP is one of them: a pod is
// sent SIGHUP only by an operator, and dying at once, Go's default, is the
// worst answer to it. It is caught even when the bridge was started with
// SIGHUP ignored (nohup).
var stopSignals = []os.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP}

// onStopSignals returns two contexts. stop ends at the first of
// stopSignals: the bridge stops, publishing what it holds first. hard ends
// at the second: the bridge gives up what it has not published and exits.
// stop is a child of hard, so it ends with it. Signals after the second
// are logged and ignored. release stops catching them.
func onStopSignals(log *slog.Logger) (stop, hard context.Context, release func()) {
	hard, stopHard := context.WithCancel(context.Background())
	stop, stopSoft := context.WithCancel(hard)
	sigs := make(chan os.Signal, 3)
	signal.Notify(sigs, stopSignals...)
	done := make(chan struct{})
	go func() {
		defer utilruntime.HandleCrash()
		n := 0
		for {
			select {
			case sig := <-sigs:
				n++
				switch n {
				case 1:
					log.Info("stopping gracefully; a second signal stops at once", "signal", sig.String())
					stopSoft()
				case 2:
					log.Warn("second signal: stopping at once", "signal", sig.String())
					stopHard()
				default:
					log.Info("already stopping at once", "signal", sig.String())
				}
			case <-done:
				return
			}
		}
	}()
	return stop, hard, func() {
		signal.Stop(sigs)
		close(done)
		stopSoft()
		stopHard()
	}
}

// dumpOnQuit makes SIGQUIT write the stack of every goroutine to w, which
// is what people send it for, and exit with exitQuit. Nothing is flushed
// on the way out: as after a crash, the next start publishes again what
// was published since the last checkpoint flush.
func dumpOnQuit(w io.Writer) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGQUIT)
	go func() {
		<-sigs
		fmt.Fprintf(w, "bridge: SIGQUIT: the stack of every goroutine follows; exiting with %d\n\n", exitQuit)
		_ = pprof.Lookup("goroutine").WriteTo(w, 2)
		os.Exit(exitQuit)
	}()
}
