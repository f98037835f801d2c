package nats

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/kubebus/bridge/envvar"
	"github.com/kubebus/bridge/wire"
)

// Mode is a delivery mode (BRIDGE_NATS_MODE).
type Mode string

// Delivery modes.
const (
	// ModeJetStream publishes to a stream and waits for each message's
	// PubAck: at least once, with repeats dropped by Nats-Msg-Id.
	ModeJetStream Mode = "jetstream"
	// ModeCore publishes on core NATS: at most once.
	ModeCore Mode = "core"
)

// CEMode is a CloudEvents content mode (BRIDGE_NATS_CE_MODE).
type CEMode string

// CloudEvents content modes.
const (
	// CEStructured sends the whole event as JSON in the body.
	CEStructured CEMode = "structured"
	// CEBinary sends the attributes as ce- headers and the data as body.
	CEBinary CEMode = "binary"
)

// Config is the NATS sink's part of the bridge configuration, read from
// BRIDGE_NATS_* variables. Each field's env tag names its variable,
// envDefault gives its default and help its meaning for `bridge --help`.
// The connection settings also serve the nats-kv checkpoint. Parse turns a
// Config into the Parsed that New and Connect take. Written by hand,
// start from DefaultConfig, which holds the defaults of the tags.
type Config struct {
	// The NATS default port on the local host, where a sidecar or a
	// port-forward usually listens.
	URL string `env:"BRIDGE_NATS_URL" envDefault:"nats://127.0.0.1:4222" help:"comma-separated server URLs (nats://, tls://, ws://, wss://); credentials in a URL are never logged"`

	User         string          `env:"BRIDGE_NATS_USER" help:"user name, with BRIDGE_NATS_PASSWORD"`
	Password     envvar.Secret   `env:"BRIDGE_NATS_PASSWORD" help:"password, with BRIDGE_NATS_USER (never logged)"`
	Token        envvar.Secret   `env:"BRIDGE_NATS_TOKEN" help:"authentication token (never logged)"`
	NKeySeedFile string          `env:"BRIDGE_NATS_NKEY_SEED_FILE" help:"file holding an NKey seed to authenticate with"`
	CredsFile    string          `env:"BRIDGE_NATS_CREDS_FILE" help:"credentials file (user JWT and NKey seed) to authenticate with"`
	TLSFiles     envvar.TLSFiles `envPrefix:"BRIDGE_NATS_"`
	// Ten seconds notices a recovered server quickly without a reconnect
	// storm from many bridges after an outage.
	ReconnectMaxWait time.Duration `env:"BRIDGE_NATS_RECONNECT_MAX_WAIT" envDefault:"10s" help:"longest wait between reconnect attempts; the bridge reconnects forever, backing off from 250ms"`

	// JetStream is the mode that does not lose changes.
	Mode Mode `env:"BRIDGE_NATS_MODE" envDefault:"jetstream" help:"jetstream (at least once: wait for each message's PubAck) or core (at most once)"`
	// "kube" says what the subjects carry and is short to type in
	// subscriptions.
	SubjectPrefix string `env:"BRIDGE_NATS_SUBJECT_PREFIX" envDefault:"kube" help:"first tokens of every subject; the stream the bridge creates captures <prefix>.>"`
	// Empty means the layout's default (SubjectLayout): one token per
	// part of an object's identity, so consumers can subscribe with
	// wildcards at any level, and without {version} in the state layout.
	Subject string `env:"BRIDGE_NATS_SUBJECT" help:"subject layout: tokens separated by dots, each a fixed word or one of {prefix} (first), {cluster}, {group}, {version}, {resource}, {kind}, {namespace}, {name}, {action}. Default: {prefix}.{cluster}.{group}.{resource}.{namespace}.{name} in the state layout, which needs {group}, {resource}, {namespace} and {name} and refuses {version} and {action}; {prefix}.{cluster}.{group}.{version}.{resource}.{namespace}.{name} in the history layout and in core mode"`
	// Structured mode is what the stdout sink writes, so consumers read
	// one format everywhere.
	CEMode CEMode `env:"BRIDGE_NATS_CE_MODE" envDefault:"structured" help:"CloudEvents content mode: structured (JSON event in the body) or binary (ce- headers, data in the body)"`

	// The state layout lets a consumer that starts at any time read the
	// whole current state from the stream; history is the layout of
	// earlier versions, kept for consumers that want every change.
	Layout Layout `env:"BRIDGE_NATS_LAYOUT" envDefault:"state" help:"state (the stream keeps each object's latest message for as long as the object lives; a delete expires after BRIDGE_NATS_DELETE_TTL) or history (the stream keeps every message for BRIDGE_NATS_STREAM_MAX_AGE). An existing stream of the other layout is a start-up error, never changed"`
	// A day lets a consumer that was away for a night still see the
	// deletes it missed; a consumer away longer reads the state again.
	DeleteTTL time.Duration `env:"BRIDGE_NATS_DELETE_TTL" envDefault:"24h" help:"state layout: how long a deleted object's last message (the delete) stays in the stream before it expires; whole seconds, at least 1s"`

	// Upper case marks it as a stream at a glance in `nats stream ls`.
	Stream string `env:"BRIDGE_NATS_STREAM" envDefault:"KUBE" help:"JetStream stream the messages go to"`
	// Creating the stream makes a first start work with no set-up;
	// operators who manage streams themselves turn it off.
	CreateStream bool `env:"BRIDGE_NATS_CREATE_STREAM" envDefault:"true" help:"create the stream when it is missing (and create or update the nats-kv checkpoint bucket) at start-up; when false they must exist. An existing stream is never changed"`
	// A week lets a consumer be down over a long weekend and catch up.
	StreamMaxAge time.Duration `env:"BRIDGE_NATS_STREAM_MAX_AGE" envDefault:"168h" help:"history layout: oldest message the created stream keeps; 0 keeps messages forever. Ignored in the state layout, whose stream has no age limit"`
	// One replica works on a single server; use 3 on a cluster.
	StreamReplicas int `env:"BRIDGE_NATS_STREAM_REPLICAS" envDefault:"1" help:"replicas of the created stream (1 to 5)"`
	// Ten minutes is far above the 1s checkpoint interval plus a crashed
	// pod's restart, so the changes a crash makes the bridge publish again
	// are still within the window and dropped.
	DuplicateWindow time.Duration `env:"BRIDGE_NATS_DUPLICATE_WINDOW" envDefault:"10m" help:"how long the created stream remembers message ids to drop repeats; keep it above BRIDGE_CHECKPOINT_INTERVAL plus a restart"`
	// Enough for every worker's full batch at the defaults (4 x 500) to
	// be in flight at once, while bounding what waits for acks.
	MaxInFlight int `env:"BRIDGE_NATS_MAX_IN_FLIGHT" envDefault:"2048" help:"most JetStream publishes waiting for their PubAck at once"`
	// Long enough for a stream leader election on a cluster, short enough
	// that a lost ack is retried soon.
	AckTimeout time.Duration `env:"BRIDGE_NATS_ACK_TIMEOUT" envDefault:"10s" help:"how long a publish waits for its PubAck (core mode: for the server's flush) before it is retried"`
}

// defaultStreamMaxAge is the default of BRIDGE_NATS_STREAM_MAX_AGE, to
// tell when the state layout ignores a value set on purpose.
const defaultStreamMaxAge = 168 * time.Hour

// DefaultConfig is the Config of an environment that sets none of its
// variables: every field at its envDefault.
func DefaultConfig() Config {
	var c Config
	envvar.Defaults(&c)
	return c
}

// Parsed is a Config parsed and checked by Parse: what New and Connect
// take. The Config's fields read as they were given; what needed parsing
// (the server URLs, the subject template, the TLS files) is parsed once,
// here. Printed, it shows the Config with its secrets redacted.
type Parsed struct {
	Config
	servers []*url.URL
	tmpl    *wire.SubjectTemplate
	// tls is the TLS files read by Parse, nil without them (a tls:// URL
	// still uses TLS). Connections read the files again at every connect
	// to take up renewed certificates (see options).
	tls *tls.Config
	// nkey authenticates with the NKey seed file; it reads the seed again
	// for each signature, so that the seed is not kept in memory.
	nkey nats.Option
}

// Parse checks c and parses it into Parsed. It reports every problem,
// joined, each an *envvar.Error naming its variable. No message quotes a
// password, a token or a URL's credentials.
func (c *Config) Parse() (*Parsed, error) {
	var p envvar.Problems
	bad := p.Add
	set := &Parsed{Config: *c}

	servers, err := c.servers()
	if err != nil {
		bad("BRIDGE_NATS_URL", "%v", err)
	} else if len(servers) == 0 {
		bad("BRIDGE_NATS_URL", "required: name at least one server, such as nats://127.0.0.1:4222")
	}
	set.servers = servers

	switch {
	case c.User != "" && c.Password == "":
		bad("BRIDGE_NATS_PASSWORD", "required with BRIDGE_NATS_USER")
	case c.User == "" && c.Password != "":
		bad("BRIDGE_NATS_USER", "required with BRIDGE_NATS_PASSWORD")
	}
	var methods []string
	for _, m := range []struct{ name, value string }{
		{"BRIDGE_NATS_USER", c.User}, {"BRIDGE_NATS_TOKEN", string(c.Token)},
		{"BRIDGE_NATS_NKEY_SEED_FILE", c.NKeySeedFile}, {"BRIDGE_NATS_CREDS_FILE", c.CredsFile},
	} {
		if m.value != "" {
			methods = append(methods, m.name)
		}
	}
	if len(methods) > 1 {
		bad(methods[1], "set together with %s; choose one way to authenticate", strings.Join(append(methods[:1:1], methods[2:]...), " and "))
	}
	if err := checkFile(c.NKeySeedFile); err != nil {
		bad("BRIDGE_NATS_NKEY_SEED_FILE", "%v", err)
	} else if c.NKeySeedFile != "" {
		if set.nkey, err = nats.NkeyOptionFromSeed(c.NKeySeedFile); err != nil {
			bad("BRIDGE_NATS_NKEY_SEED_FILE", "%v", err)
		}
	}
	// The credentials file is read at every connect, so that rotated
	// credentials are taken up.
	if err := checkFile(c.CredsFile); err != nil {
		bad("BRIDGE_NATS_CREDS_FILE", "%v", err)
	}
	if c.TLSFiles.Set() {
		// The server's name comes from the URL of each server.
		set.tls, err = c.TLSFiles.Config("BRIDGE_NATS_", "")
		p.Join(err)
	}
	if c.ReconnectMaxWait <= 0 {
		bad("BRIDGE_NATS_RECONNECT_MAX_WAIT", "must be positive, got %s", c.ReconnectMaxWait)
	}

	if c.Mode != ModeJetStream && c.Mode != ModeCore {
		bad("BRIDGE_NATS_MODE", "%q is not a mode; use jetstream or core", c.Mode)
	}
	layoutOK := c.Layout == LayoutState || c.Layout == LayoutHistory
	if !layoutOK {
		bad("BRIDGE_NATS_LAYOUT", "%q is not a layout; use state or history", c.Layout)
	}
	if err := wire.CheckSubjectPrefix(c.SubjectPrefix); err != nil {
		bad("BRIDGE_NATS_SUBJECT_PREFIX", "%q: %v", c.SubjectPrefix, err)
	} else if t, err := wire.ParseSubjectTemplate(c.SubjectLayout(), c.SubjectPrefix); err != nil {
		bad("BRIDGE_NATS_SUBJECT", "%q: %v", c.SubjectLayout(), err)
	} else {
		set.tmpl = t
		// Core NATS keeps nothing, so no subject has to hold a state.
		if c.Layout == LayoutState && c.Mode == ModeJetStream {
			if err := t.ServesState(); err != nil {
				bad("BRIDGE_NATS_SUBJECT", "%q cannot serve BRIDGE_NATS_LAYOUT=state: %v", c.SubjectLayout(), err)
			}
		}
	}
	switch {
	case c.Layout != LayoutState:
	case c.DeleteTTL < time.Second:
		bad("BRIDGE_NATS_DELETE_TTL", "must be at least 1s, the shortest message TTL NATS keeps, got %s", c.DeleteTTL)
	case c.DeleteTTL%time.Second != 0:
		bad("BRIDGE_NATS_DELETE_TTL", "must be whole seconds, as NATS keeps message TTLs, got %s", c.DeleteTTL)
	}
	if c.CEMode != CEStructured && c.CEMode != CEBinary {
		bad("BRIDGE_NATS_CE_MODE", "%q is not a content mode; use structured or binary", c.CEMode)
	}

	if err := checkStreamName(c.Stream); err != nil {
		bad("BRIDGE_NATS_STREAM", "%q: %v", c.Stream, err)
	}
	if c.StreamMaxAge < 0 {
		bad("BRIDGE_NATS_STREAM_MAX_AGE", "must not be negative, got %s", c.StreamMaxAge)
	}
	if c.StreamReplicas < 1 || c.StreamReplicas > 5 {
		bad("BRIDGE_NATS_STREAM_REPLICAS", "must be 1 to 5, got %d", c.StreamReplicas)
	}
	switch {
	case c.DuplicateWindow <= 0:
		bad("BRIDGE_NATS_DUPLICATE_WINDOW", "must be positive, got %s", c.DuplicateWindow)
	case c.Layout == LayoutHistory && c.StreamMaxAge > 0 && c.DuplicateWindow > c.StreamMaxAge:
		bad("BRIDGE_NATS_DUPLICATE_WINDOW", "%s is longer than BRIDGE_NATS_STREAM_MAX_AGE (%s); NATS does not allow that", c.DuplicateWindow, c.StreamMaxAge)
	}
	if c.MaxInFlight <= 0 {
		bad("BRIDGE_NATS_MAX_IN_FLIGHT", "must be positive, got %d", c.MaxInFlight)
	}
	if c.AckTimeout <= 0 {
		bad("BRIDGE_NATS_ACK_TIMEOUT", "must be positive, got %s", c.AckTimeout)
	}
	if err := p.Err(); err != nil {
		return nil, err
	}
	return set, nil
}

// SubjectLayout is the subject layout in use: BRIDGE_NATS_SUBJECT, or when
// it is empty the layout's default, DefaultStateSubject in the state
// layout and DefaultHistorySubject in the history layout and in core mode (which
// stores nothing, so keeps the subjects it had before layouts existed).
func (c *Config) SubjectLayout() string {
	switch {
	case c.Subject != "":
		return c.Subject
	case c.Layout == LayoutHistory, c.Mode == ModeCore:
		return wire.DefaultHistorySubject
	}
	return wire.DefaultStateSubject
}

func checkFile(path string) error {
	if path == "" {
		return nil
	}
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", path)
	}
	return nil
}

// checkStreamName reports why name cannot name a JetStream stream.
func checkStreamName(name string) error {
	switch {
	case name == "":
		return errors.New("must not be empty")
	case len(name) > 255:
		return errors.New("longer than 255 bytes")
	case strings.ContainsAny(name, ".*>/\\"):
		return errors.New(`must not hold ".", "*", ">", "/" or "\"`)
	}
	for i := 0; i < len(name); i++ {
		if name[i] <= ' ' || name[i] >= 0x7f {
			return errors.New("must be printable ASCII without whitespace")
		}
	}
	return nil
}
