// Package outside uses the bridge's public API from a module of its own,
// as a stranger would: it can name only what the bridge exports, and no
// package under its internal/ directories. Its tests build the sinks'
// configurations from plain values, open every checkpoint store on a real
// server, and write a source.View; what does not compile here cannot be
// used from outside. `make test` runs them.
package outside
