// Package envvar holds what every part of the bridge's configuration read
// from environment variables shares: the error that names the variable at
// fault, the Secret type that never shows its value, and TLS files read
// into a *tls.Config.
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
