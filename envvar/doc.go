// Package envvar holds what every configuration of the bridge read from
// environment variables shares: the error that names the variable at
// fault, the Secret type that never shows its value, and TLS files read
// into a *tls.Config.
//
// It is public because the public configurations are made of it
// (sink/nats.Config, kafkaconn.Config): code outside this module fills in
// their Secret and TLSFiles fields, and finds the variable at fault in
// their Parse errors with errors.As and *Error.
//
// Every configuration of the bridge's public packages is written one way
// (docs/api.md): a Config of plain values, each field the mirror of a
// variable named by its env tag, with its default in its envDefault tag
// (DefaultConfig returns them, through Defaults); Config.Parse checks it
// once, reports every problem as an *Error, and returns the parsed form,
// named for what it is (kafkaconn.Conn, a sink's Parsed), which
// constructors take without checking it again; the knobs of one call are a
// plain Options struct, a field left zero taking its documented default;
// no functional options.
//
// Guarantees:
//
//   - Every problem a configuration reports is an *Error whose Var names
//     the variable at fault; callers find it with errors.As, never by
//     reading the message.
//   - A Secret prints, logs and marshals as "[redacted]" (or "" when
//     empty), whichever verb, logger or encoder shows it.
//   - TLS files are read once, by TLSFiles.Config; the *tls.Config it
//     returns is what every connection uses.
package envvar
