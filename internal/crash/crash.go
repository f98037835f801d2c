// Package crash gives every panic the bridge can catch the same end: the
// panic is logged with the stack it came from, and the process exits with
// ExitCode, 1, the code of a runtime failure. Left to the Go runtime, a
// panic exits with 2, the bridge's code for an invalid configuration,
// which would send an operator looking at the wrong thing.
//
// Panics are caught where goroutines start. client-go and apimachinery
// run their loops (reflectors, informers, the leader election) under
// k8s.io/apimachinery/pkg/util/runtime.HandleCrash, which calls the panic
// handlers before it panics again; Install makes the handler log and exit
// first. The bridge's own goroutines, main's included, defer HandleCrash
// at their top for the same end.
//
// What still exits with 2: a fatal error of the Go runtime (out of memory,
// a concurrent map write, every goroutine asleep), which no code can
// intercept; and a panic in a goroutine that a library other than
// client-go starts (nats.go and kafka-go run their own), where no handler
// of the bridge is on the stack.
package crash

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"

	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
)

// ExitCode is the exit code of a process that panicked: 1, a runtime
// failure.
const ExitCode = 1

// Install makes every panic that reaches HandleCrash log the panic and its
// stack to log and exit with ExitCode. It replaces apimachinery's own
// handler, which only logs. Call it before starting goroutines; a second
// call replaces the logger of the first.
func Install(log *slog.Logger) {
	utilruntime.PanicHandlers = []func(context.Context, any){func(_ context.Context, r any) {
		// Called on the panicking goroutine before it unwinds: the stack
		// goes down to where the panic was raised.
		log.Error("panic: exiting", "panic", fmt.Sprint(r), "code", ExitCode, "stack", string(debug.Stack()))
		os.Exit(ExitCode)
	}}
}
