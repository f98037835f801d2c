package rawobject

import (
	"os"
	"path/filepath"
	"testing"
)

// fixtures are objects as the API server sends them, managedFields
// included, in testdata: a ConfigMap of about 2 KiB and a Pod of about
// 13 KiB. fixtures_gen_test.go makes them (it is an external test: the
// objects come from test/synthetic, which imports source, which imports
// this package).
var fixtures = []struct{ name string }{{"configmap"}, {"pod"}}

func fixturePath(name string) string { return filepath.Join("testdata", name+".json") }

func readFixture(tb testing.TB, name string) []byte {
	tb.Helper()
	b, err := os.ReadFile(fixturePath(name))
	if err != nil {
		tb.Fatal(err)
	}
	return b
}
