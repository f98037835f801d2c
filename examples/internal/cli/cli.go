// Package cli is how the example commands start, stop and connect: a
// logger on standard error, a context that ends on SIGINT or SIGTERM, an
// exit status of 1 when the command failed, and the NATS connection the
// NATS examples make.
package cli

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

// Main runs run until it returns, with a context that ends when the
// process is told to stop, and exits with status 1, the error logged
// under name, when run fails. A run that ends because its context did is
// not a failure.
func Main(name string, run func(ctx context.Context, out io.Writer, log *slog.Logger) error) {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Stdout, log)
	stop()
	if err != nil && !errors.Is(err, context.Canceled) {
		log.Error(name, "err", err)
		os.Exit(1)
	}
}

// Split returns the items of a comma-separated flag, trimmed of spaces,
// without the empty ones.
func Split(s string) []string {
	var out []string
	for part := range strings.SplitSeq(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}
