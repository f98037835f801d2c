package kafkaconn

import (
	"github.com/twmb/franz-go/pkg/kgo"
	kgosasl "github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/kubebus/bridge/envvar"
)

// KgoOpts are the franz-go client options of the connection: the
// bootstrap brokers, the client id, the dial timeout, and the TLS and SASL
// settings Parse made. A client made with them (kgo.NewClient) reaches
// the cluster as the kafka-go transport and dialer do; the caller adds
// the options of its own use after them.
func (c *Conn) KgoOpts() []kgo.Opt {
	opts := []kgo.Opt{
		kgo.SeedBrokers(c.brokers...),
		kgo.ClientID(c.clientID),
		kgo.DialTimeout(dialTimeout),
	}
	if c.tls != nil {
		// franz-go sets each broker's host as the server name when the
		// config has none.
		opts = append(opts, kgo.DialTLSConfig(c.tls.Clone()))
	}
	if c.kgoSASL != nil {
		opts = append(opts, kgo.SASL(c.kgoSASL))
	}
	return opts
}

// kgoSASL is franz-go's mechanism of a valid, lower-case mechanism name.
// franz-go's mechanisms keep the credentials in closures, which print as
// addresses, never as the password.
func kgoSASL(mechanism, user string, pass envvar.Secret) kgosasl.Mechanism {
	switch mechanism {
	case SASLPlain:
		return plain.Auth{User: user, Pass: string(pass)}.AsMechanism()
	case SASLScramSHA256:
		return scram.Auth{User: user, Pass: string(pass)}.AsSha256Mechanism()
	case SASLScramSHA512:
		return scram.Auth{User: user, Pass: string(pass)}.AsSha512Mechanism()
	}
	return nil
}
