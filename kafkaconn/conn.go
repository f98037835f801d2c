package kafkaconn

import (
	"cmp"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	kafkago "github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl"
	kgosasl "github.com/twmb/franz-go/pkg/sasl"
)

// Connection timings, the same for every client of the bridge.
const (
	// dialTimeout bounds a connection's set-up: TCP, TLS and SASL.
	dialTimeout = 10 * time.Second
	// keepAlive lets the OS notice brokers that vanished without a FIN.
	keepAlive = 30 * time.Second
	// metadataTTL is how stale kafka-go's view of partition leaders may
	// get. kafka-go does not refresh it when a write fails with "not
	// leader", so after a leader moves writes fail until the next refresh:
	// a short TTL shortens that, and with the metadata limited to the
	// bridge's own topics a refresh is cheap. (kafka-go's default is 6s.)
	metadataTTL = 3 * time.Second
)

// Conn is a parsed, valid Config: what the clients of one cluster are made
// from. It is read-only, so safe for concurrent use.
type Conn struct {
	brokers   []string
	clientID  string
	tls       *tls.Config // nil: plaintext
	sasl      sasl.Mechanism
	kgoSASL   kgosasl.Mechanism // sasl's twin, for franz-go
	mechanism string            // BRIDGE_KAFKA_SASL_MECHANISM in lower case; "" for none
}

// Brokers is the bootstrap brokers, without blanks.
func (c *Conn) Brokers() []string { return slices.Clone(c.brokers) }

// Addr is the bootstrap brokers as a kafka-go address.
func (c *Conn) Addr() net.Addr { return kafkago.TCP(c.brokers...) }

// TLS reports whether connections use TLS.
func (c *Conn) TLS() bool { return c.tls != nil }

// SASLMechanism is the SASL mechanism's name in lower case (SASLPlain,
// SASLScramSHA256, SASLScramSHA512), or "" without SASL.
func (c *Conn) SASLMechanism() string { return c.mechanism }

// Transport returns a kafka-go Transport for the brokers, with the TLS and
// SASL settings. Its cached metadata covers only topics (all of the
// cluster's when nil). The transport's background work stops when ctx
// ends; call its CloseIdleConnections as well when done with it.
func (c *Conn) Transport(ctx context.Context, topics []string) *kafkago.Transport {
	return &kafkago.Transport{
		Dial:           (&net.Dialer{Timeout: dialTimeout, KeepAlive: keepAlive}).DialContext,
		DialTimeout:    dialTimeout,
		MetadataTTL:    metadataTTL,
		MetadataTopics: topics,
		ClientID:       c.clientID,
		TLS:            c.tls,
		SASL:           c.sasl,
		Context:        ctx,
	}
}

// Dialer returns a kafka-go Dialer (for kafka-go's Conn and Reader) with
// the client id, TLS and SASL settings.
func (c *Conn) Dialer() *kafkago.Dialer {
	return &kafkago.Dialer{
		ClientID:      c.clientID,
		Timeout:       dialTimeout,
		KeepAlive:     keepAlive,
		DualStack:     true,
		TLS:           c.tls,
		SASLMechanism: c.sasl,
	}
}

// String describes the connection without its secrets: printing a Conn,
// or a struct that holds one, never shows the SASL password.
func (c Conn) String() string {
	return fmt.Sprintf("brokers=%s tls=%t sasl=%s", strings.Join(c.brokers, ","), c.tls != nil, cmp.Or(c.mechanism, "none"))
}

// GoString keeps %#v from printing the SASL password.
func (c Conn) GoString() string { return strconv.Quote(c.String()) }

// Format prints String whatever the verb, so that no verb shows the
// fields.
func (c Conn) Format(f fmt.State, verb rune) {
	if verb == 'v' && f.Flag('#') {
		_, _ = io.WriteString(f, c.GoString())
		return
	}
	_, _ = io.WriteString(f, c.String())
}

// LogValue keeps slog from printing the SASL password.
func (c Conn) LogValue() slog.Value { return slog.StringValue(c.String()) }

// redacted is a SASL mechanism that never prints its credentials.
// kafka-go's mechanisms are structs that hold the password, and a
// Transport or a Dialer, which hold the mechanism, may be printed by
// whoever uses them: printed, a redacted mechanism shows its name alone.
type redacted struct{ m sasl.Mechanism }

func (r redacted) Name() string { return r.m.Name() }

func (r redacted) Start(ctx context.Context) (sasl.StateMachine, []byte, error) {
	return r.m.Start(ctx)
}

func (r redacted) String() string { return r.m.Name() + " [redacted]" }

// Format prints String whatever the verb, %#v and %+v included.
func (r redacted) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, r.String()) }
