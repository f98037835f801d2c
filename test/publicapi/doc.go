// Package publicapi holds the check that keeps the module's public API
// usable from another module: no exported function, method, field, type,
// variable or constant of a package outside internal/ (and outside cmd/,
// examples/ and test/, which are not an API) names a type of an internal/
// package. Code outside the module cannot name such a type, so it could
// neither fill in the field nor implement the interface. It has no code
// outside its test.
package publicapi
