// Command natsserver runs a NATS server with JetStream on a file store, on
// a random loopback port, as a process of its own: the broker of the
// latency benchmark, which, as in production, shares no process with the
// writers or the consumer.
//
// It writes the server's client URL to standard output once the server is
// ready, and shuts the server down when standard input closes or on
// SIGTERM.
//
//	natsserver -store /tmp/js
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

func main() {
	store := flag.String("store", "", "directory of the JetStream file store (required)")
	flag.Parse()
	if err := run(*store); err != nil {
		fmt.Fprintln(os.Stderr, "natsserver:", err)
		os.Exit(1)
	}
}

func run(store string) error {
	if store == "" {
		return errors.New("-store is required")
	}
	srv, err := server.NewServer(&server.Options{
		ServerName: "bench",
		Host:       "127.0.0.1",
		Port:       server.RANDOM_PORT,
		NoLog:      true,
		NoSigs:     true,
		JetStream:  true,
		StoreDir:   store,
	})
	if err != nil {
		return err
	}
	srv.Start()
	defer srv.WaitForShutdown()
	defer srv.Shutdown()
	if !srv.ReadyForConnections(30 * time.Second) {
		return errors.New("the server was not ready within 30s")
	}
	fmt.Println(srv.ClientURL())

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, os.Interrupt)
	closed := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(closed)
	}()
	select {
	case <-stop:
	case <-closed:
	}
	return nil
}
