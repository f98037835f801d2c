// Package guarantees holds the check that keeps docs/guarantees.md
// honest: every test the page names as proof of a promise exists, in the
// file the page's index of tests gives for it, and the index lists every
// test the page names and no other. It has no code outside its test.
package guarantees
