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
