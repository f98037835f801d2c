// Package kafkaconn is the bridge's connection to a Kafka cluster, shared
// by the Kafka sink (sink/kafka) and the Kafka checkpoint store
// (checkpoint/kafkastore): the connection's variables (brokers, client id,
// TLS, SASL), parsed once into a Conn, the kafka-go transport and dialer
// made from it, and the checks and creation of topics.
//
// Guarantees:
//
//   - Config.Parse reports every problem at once, each an *envvar.Error
//     that names its variable; a Conn exists only for a valid Config. TLS
//     files are read and the SASL mechanism is made once, in Parse, and
//     every transport and dialer of the Conn uses them.
//   - The SASL password is never logged, printed or put in an error.
//   - Every connection of a Conn has the same timings (see dialTimeout,
//     keepAlive and metadataTTL), whichever client uses it.
package kafkaconn
