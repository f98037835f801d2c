package nats

import natssink "github.com/kubebus/bridge/sink/nats"

// Config names where the bridge publishes: the same values as its
// BRIDGE_NATS_STREAM, BRIDGE_NATS_SUBJECT and BRIDGE_NATS_SUBJECT_PREFIX.
// The zero value reads a bridge that runs with their defaults.
type Config struct {
	// Stream is the JetStream stream; default "KUBE", the bridge's
	// default.
	Stream string
	// Subject is the bridge's subject layout; default
	// sink/nats.DefaultStateSubject, the default of the state layout.
	Subject string
	// SubjectPrefix is the bridge's subject prefix; default "kube", the
	// bridge's default.
	SubjectPrefix string
}

// withDefaults fills the fields left empty.
func (c Config) withDefaults() Config {
	if c.Stream == "" {
		c.Stream = "KUBE"
	}
	if c.Subject == "" {
		c.Subject = natssink.DefaultStateSubject
	}
	if c.SubjectPrefix == "" {
		c.SubjectPrefix = "kube"
	}
	return c
}
