// Package kafkaconn is the bridge's connection to a Kafka cluster: the
// brokers, the client id, TLS and SASL, written as a Config of plain
// values (the BRIDGE_KAFKA_* variables that name them), parsed once into a
// Conn, and the kafka-go transport and dialer and the franz-go client
// options (KgoOpts) made from it. The Kafka sink
// (sink/kafka) and the Kafka checkpoint store (checkpoint/kafkastore) both
// take a Conn, so that a program outside this module can open either one
// from values of its own, not only from a sink's configuration.
//
// Guarantees:
//
//   - Config.Parse reports every problem at once, each an *envvar.Error
//     that names its variable; a Conn exists only for a valid Config. TLS
//     files are read and the SASL mechanism is made once, in Parse (or
//     ParseAs, which names the variables with another prefix), and every
//     transport, dialer and KgoOpts of the Conn uses them.
//   - The SASL password is never logged, printed or put in an error.
//   - Every connection of a Conn has the same timings (see dialTimeout,
//     keepAlive and metadataTTL), whichever client uses it.
package kafkaconn
