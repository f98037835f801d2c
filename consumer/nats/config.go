package nats

import "github.com/kubebus/bridge/wire"

// Config names where the bridge publishes: the same values as its
// BRIDGE_NATS_STREAM, BRIDGE_NATS_SUBJECT and BRIDGE_NATS_SUBJECT_PREFIX.
// The zero value reads a bridge that runs with their defaults.
type Config struct {
	// Stream is the JetStream stream; default wire.DefaultStream, the
	// bridge's default.
	Stream string
	// Subject is the bridge's subject layout; default
	// wire.DefaultStateSubject, the default of the state layout.
	Subject string
	// SubjectPrefix is the bridge's subject prefix; default
	// wire.DefaultSubjectPrefix, the bridge's default.
	SubjectPrefix string
}

// withDefaults fills the fields left empty.
func (c Config) withDefaults() Config {
	if c.Stream == "" {
		c.Stream = wire.DefaultStream
	}
	if c.Subject == "" {
		c.Subject = wire.DefaultStateSubject
	}
	if c.SubjectPrefix == "" {
		c.SubjectPrefix = wire.DefaultSubjectPrefix
	}
	return c
}
