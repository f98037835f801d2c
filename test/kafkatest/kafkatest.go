// Package kafkatest starts in-process Kafka clusters (kfake, from franz-go)
// on loopback for tests, and reads what they hold.
//
// A cluster has three brokers on random 127.0.0.1 ports and lives until
// the test that started it ends. Helpers read topics with franz-go, an
// independent client, so that tests of the bridge's kafka-go code do not
// check it with itself.
package kafkatest

import (
	"context"
	"crypto/tls"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// Brokers is the number of brokers of every cluster.
const Brokers = 3

// Cluster is a running kfake cluster.
type Cluster struct {
	*kfake.Cluster
	t    testing.TB
	opts options
}

type options struct {
	kfake     []kfake.Opt
	mechanism string // SASL mechanism as Kafka names it, or ""
	user      string
	pass      string
	clientTLS *tls.Config
}

// Option configures Start.
type Option func(*options)

// WithSASL makes the cluster require SASL with one user. mechanism is
// "PLAIN", "SCRAM-SHA-256" or "SCRAM-SHA-512". The cluster's own clients
// (Client, Admin) log in as that user.
func WithSASL(mechanism, user, pass string) Option {
	return func(o *options) {
		o.kfake = append(o.kfake, kfake.EnableSASL(), kfake.Superuser(mechanism, user, pass))
		o.mechanism, o.user, o.pass = mechanism, user, pass
	}
}

// WithTLS makes the brokers listen with TLS; the cluster's own clients use
// client.
func WithTLS(server, client *tls.Config) Option {
	return func(o *options) {
		o.kfake = append(o.kfake, kfake.TLS(server))
		o.clientTLS = client
	}
}

// WithBrokerConfigs sets broker configs, such as message.max.bytes.
func WithBrokerConfigs(configs map[string]string) Option {
	return func(o *options) { o.kfake = append(o.kfake, kfake.BrokerConfigs(configs)) }
}

// WithListenFn makes the brokers listen with fn instead of net.Listen, for
// a test that wraps their connections (to count the bytes they send, say).
func WithListenFn(fn func(network, address string) (net.Listener, error)) Option {
	return func(o *options) { o.kfake = append(o.kfake, kfake.ListenFn(fn)) }
}

// Start starts a cluster of three brokers that the end of t stops.
func Start(t testing.TB, opts ...Option) *Cluster {
	t.Helper()
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	kopts := append([]kfake.Opt{kfake.NumBrokers(Brokers)}, o.kfake...)
	c, err := kfake.NewCluster(kopts...)
	if err != nil {
		t.Fatalf("kafkatest: start cluster: %v", err)
	}
	t.Cleanup(c.Close)
	return &Cluster{Cluster: c, t: t, opts: o}
}

// Addrs is the brokers' host:port addresses.
func (c *Cluster) Addrs() []string { return c.ListenAddrs() }

// Client returns a franz-go client for the cluster, with the cluster's
// TLS and SASL settings, closed when the test ends.
func (c *Cluster) Client(opts ...kgo.Opt) *kgo.Client {
	c.t.Helper()
	cl := c.newClient(opts...)
	c.t.Cleanup(cl.Close)
	return cl
}

// newClient is Client for a caller that closes it.
func (c *Cluster) newClient(opts ...kgo.Opt) *kgo.Client {
	c.t.Helper()
	all := []kgo.Opt{kgo.SeedBrokers(c.Addrs()...), kgo.FetchMaxWait(200 * time.Millisecond)}
	if c.opts.clientTLS != nil {
		all = append(all, kgo.DialTLSConfig(c.opts.clientTLS))
	}
	switch c.opts.mechanism {
	case "PLAIN":
		all = append(all, kgo.SASL(plain.Auth{User: c.opts.user, Pass: c.opts.pass}.AsMechanism()))
	case "SCRAM-SHA-256":
		all = append(all, kgo.SASL(scram.Auth{User: c.opts.user, Pass: c.opts.pass}.AsSha256Mechanism()))
	case "SCRAM-SHA-512":
		all = append(all, kgo.SASL(scram.Auth{User: c.opts.user, Pass: c.opts.pass}.AsSha512Mechanism()))
	}
	cl, err := kgo.NewClient(append(all, opts...)...)
	if err != nil {
		c.t.Fatalf("kafkatest: client: %v", err)
	}
	return cl
}

// Admin returns an admin client for the cluster.
func (c *Cluster) Admin() *kadm.Client {
	c.t.Helper()
	return kadm.NewClient(c.Client())
}

// CreateTopic creates a topic with the given partitions and configs.
func (c *Cluster) CreateTopic(topic string, partitions int32, configs map[string]string) {
	c.t.Helper()
	cfgs := map[string]*string{}
	for k, v := range configs {
		cfgs[k] = &v
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := c.Admin().CreateTopic(ctx, partitions, -1, cfgs, topic)
	if err == nil {
		err = res.Err
	}
	if err != nil {
		c.t.Fatalf("kafkatest: create topic %s: %v", topic, err)
	}
}

// TopicConfig returns a topic's config value, "" when it has none.
func (c *Cluster) TopicConfig(topic, name string) string {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rcs, err := c.Admin().DescribeTopicConfigs(ctx, topic)
	if err != nil {
		c.t.Fatalf("kafkatest: describe topic %s: %v", topic, err)
	}
	rc, err := rcs.On(topic, nil)
	if err != nil {
		c.t.Fatalf("kafkatest: describe topic %s: %v", topic, err)
	}
	for _, cfg := range rc.Configs {
		if cfg.Key == name && cfg.Value != nil {
			return *cfg.Value
		}
	}
	return ""
}

// Partitions returns the number of partitions of topic, 0 when it does not
// exist.
func (c *Cluster) Partitions(topic string) int {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tds, err := c.Admin().ListTopics(ctx, topic)
	if err != nil {
		c.t.Fatalf("kafkatest: list topic %s: %v", topic, err)
	}
	td, ok := tds[topic]
	if !ok || td.Err != nil {
		return 0
	}
	return len(td.Partitions)
}

// SetTopicConfig sets one config of a topic.
func (c *Cluster) SetTopicConfig(topic, name, value string) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := c.Admin().AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: name, Value: &value}}, topic)
	if err == nil {
		for _, r := range res {
			if r.Err != nil {
				err = r.Err
			}
		}
	}
	if err != nil {
		c.t.Fatalf("kafkatest: set %s of topic %s: %v", name, topic, err)
	}
}
