// Package natstest runs a real NATS server, with JetStream on a file
// store, inside the test process.
//
// A Server listens on a random loopback port and keeps its JetStream files
// in a temporary directory of the test. Restart, and Shutdown followed by
// Start, bring the server back on the same port with the same files, so
// that streams, key-value buckets and their contents survive, as they
// would across a restart of a real server. The server is shut down when
// the test ends.
package natstest

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"github.com/kubebus/bridge/test/tlstest"
)

// readyTimeout bounds how long Start waits for the server to accept
// clients; an in-process server is usually ready in milliseconds.
const readyTimeout = 10 * time.Second

// Options choose how clients must connect. The zero value is a plain,
// unauthenticated server.
type Options struct {
	// TLS requires TLS with a client certificate; the server's
	// certificate, the CA and a client certificate are generated for the
	// test (see Server.TLS).
	TLS bool
	// Token requires clients to present this token.
	Token string
	// User and Password require clients to present them.
	User, Password string
	// NKey requires clients to sign with an NKey; the user's seed is
	// written to a file for the test (see Server.NKeySeedFile).
	NKey bool
	// MaxPayload, when positive, is the largest message the server takes.
	MaxPayload int32
}

// Server is a NATS server running in the test process.
type Server struct {
	t    testing.TB
	o    Options
	opts server.Options
	// TLS holds the generated certificates and their files when
	// Options.TLS is set.
	TLS *tlstest.PKI
	// NKeySeedFile holds the user's NKey seed when Options.NKey is set.
	NKeySeedFile string

	mu  sync.Mutex
	srv *server.Server
}

// Start starts a server for t and shuts it down when t ends.
func Start(t testing.TB, o Options) *Server {
	t.Helper()
	s := &Server{t: t, o: o}
	s.opts = server.Options{
		ServerName: "natstest",
		Host:       "127.0.0.1",
		Port:       server.RANDOM_PORT,
		NoLog:      true,
		NoSigs:     true,
		JetStream:  true,
		StoreDir:   t.TempDir(),
		MaxPayload: o.MaxPayload,
		// No HTTP monitoring, no cluster: nothing else listens.
		HTTPPort: 0,
	}
	switch {
	case o.Token != "":
		s.opts.Authorization = o.Token
	case o.User != "":
		s.opts.Username, s.opts.Password = o.User, o.Password
	case o.NKey:
		s.NKeySeedFile, s.opts.Nkeys = newNKeyUser(t)
	}
	if o.TLS {
		s.TLS = tlstest.NewPKI(t)
		s.opts.TLS = true
		s.opts.TLSVerify = true
		s.opts.TLSConfig = s.TLS.Server
		s.opts.TLSTimeout = 5
	}
	s.Start()
	// Restarts come back on the port the first start was given.
	s.opts.Port = s.srv.Addr().(*net.TCPAddr).Port
	t.Cleanup(s.Shutdown)
	return s
}

// Start starts the server again after Shutdown, on the same port and with
// the same JetStream files. It fails the test if the server does not
// become ready.
func (s *Server) Start() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv != nil {
		s.t.Fatal("natstest: Start: the server is already running")
	}
	opts := s.opts // NewServer keeps a pointer; every start gets its own copy
	srv, err := server.NewServer(&opts)
	if err != nil {
		s.t.Fatalf("natstest: new server: %v", err)
	}
	srv.Start()
	if !srv.ReadyForConnections(readyTimeout) {
		srv.Shutdown()
		s.t.Fatalf("natstest: server not ready after %s", readyTimeout)
	}
	s.srv = srv
}

// Shutdown stops the server and waits until it has stopped. Its files stay
// for a later Start. Calling it on a stopped server does nothing.
func (s *Server) Shutdown() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv == nil {
		return
	}
	s.srv.Shutdown()
	s.srv.WaitForShutdown()
	s.srv = nil
}

// Restart shuts the server down and starts it again.
func (s *Server) Restart() {
	s.t.Helper()
	s.Shutdown()
	s.Start()
}

// Port is the port clients connect to; it stays the same across restarts.
func (s *Server) Port() int { return s.opts.Port }

// URL is the client URL, without credentials: nats://127.0.0.1:<port>.
func (s *Server) URL() string {
	return "nats://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(s.opts.Port))
}

// SentTo is how many bytes the server has sent the clients whose
// connection is named name (nats.Name), those closed included, since it
// started: the client's whole reading, protocol and JetStream API answers
// included. It is 0 while the server is stopped.
func (s *Server) SentTo(name string) int64 {
	s.mu.Lock()
	srv := s.srv
	s.mu.Unlock()
	if srv == nil {
		return 0
	}
	cz, err := srv.Connz(&server.ConnzOptions{State: server.ConnAll, Limit: 1 << 16})
	if err != nil {
		s.t.Errorf("natstest: connz: %v", err)
		return 0
	}
	var n int64
	for _, c := range cz.Conns {
		if c.Name == name {
			n += c.OutBytes
		}
	}
	return n
}

// StoreDir is where the server keeps its JetStream files.
func (s *Server) StoreDir() string { return s.opts.StoreDir }

// Env is the bridge's configuration for this server: BRIDGE_NATS_URL and
// whichever credential and TLS variables the server requires.
func (s *Server) Env() map[string]string {
	env := map[string]string{"BRIDGE_NATS_URL": s.URL()}
	if s.o.Token != "" {
		env["BRIDGE_NATS_TOKEN"] = s.o.Token
	}
	if s.o.User != "" {
		env["BRIDGE_NATS_USER"] = s.o.User
		env["BRIDGE_NATS_PASSWORD"] = s.o.Password
	}
	if s.NKeySeedFile != "" {
		env["BRIDGE_NATS_NKEY_SEED_FILE"] = s.NKeySeedFile
	}
	if s.TLS != nil {
		env["BRIDGE_NATS_TLS_CA_FILE"] = s.TLS.CAFile
		env["BRIDGE_NATS_TLS_CERT_FILE"] = s.TLS.CertFile
		env["BRIDGE_NATS_TLS_KEY_FILE"] = s.TLS.KeyFile
	}
	return env
}

// ClientOptions are the nats.go options a client of this server needs.
func (s *Server) ClientOptions() []nats.Option {
	var opts []nats.Option
	if s.o.Token != "" {
		opts = append(opts, nats.Token(s.o.Token))
	}
	if s.o.User != "" {
		opts = append(opts, nats.UserInfo(s.o.User, s.o.Password))
	}
	if s.NKeySeedFile != "" {
		o, err := nats.NkeyOptionFromSeed(s.NKeySeedFile)
		if err != nil {
			s.t.Fatalf("natstest: %v", err)
		}
		opts = append(opts, o)
	}
	if s.TLS != nil {
		opts = append(opts, nats.RootCAs(s.TLS.CAFile), nats.ClientCert(s.TLS.CertFile, s.TLS.KeyFile))
	}
	return opts
}

// Conn connects a test client to the server, closed when the test ends.
// It reconnects after restarts like any client.
func (s *Server) Conn(t testing.TB) *nats.Conn {
	t.Helper()
	opts := append(s.ClientOptions(), nats.Name("natstest"), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	nc, err := nats.Connect(s.URL(), opts...)
	if err != nil {
		t.Fatalf("natstest: connect: %v", err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// JetStream returns a JetStream context on a connection of Conn's.
func (s *Server) JetStream(t testing.TB) jetstream.JetStream {
	t.Helper()
	return JetStreamOn(t, s.Conn(t))
}

// JetStreamOn returns a JetStream context on nc.
func JetStreamOn(t testing.TB, nc *nats.Conn) jetstream.JetStream {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("natstest: jetstream: %v", err)
	}
	return js
}

// Stream returns stream as nc's server has it, failing the test if it
// does not exist.
func Stream(t testing.TB, nc *nats.Conn, stream string) jetstream.Stream {
	t.Helper()
	st, err := JetStreamOn(t, nc).Stream(t.Context(), stream)
	if err != nil {
		t.Fatalf("natstest: stream %s: %v", stream, err)
	}
	return st
}

// StreamState returns the state of stream, as nc's server reports it.
func StreamState(t testing.TB, nc *nats.Conn, stream string) jetstream.StreamState {
	t.Helper()
	info, err := Stream(t, nc, stream).Info(t.Context())
	if err != nil {
		t.Fatalf("natstest: stream %s: %v", stream, err)
	}
	return info.State
}

// newNKeyUser makes an NKey user and writes its seed to a file.
func newNKeyUser(t testing.TB) (string, []*server.NkeyUser) {
	t.Helper()
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatalf("natstest: nkey: %v", err)
	}
	pub, err := kp.PublicKey()
	if err != nil {
		t.Fatalf("natstest: nkey: %v", err)
	}
	seed, err := kp.Seed()
	if err != nil {
		t.Fatalf("natstest: nkey: %v", err)
	}
	path := filepath.Join(t.TempDir(), "user.nk")
	if err := os.WriteFile(path, seed, 0o600); err != nil {
		t.Fatalf("natstest: %v", err)
	}
	return path, []*server.NkeyUser{{Nkey: pub}}
}

// String names the server for test logs.
func (s *Server) String() string { return fmt.Sprintf("natstest server at %s", s.URL()) }
