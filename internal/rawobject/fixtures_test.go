package rawobject

import (
	"os"
	"path/filepath"
	"testing"
)

// fixtures name the objects in testdata: as the API server sends them,
// managedFields included, a ConfigMap of about 2 KiB and a Pod of about
// 13 KiB. fixturegen_test.go makes them.
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

// scannedFixture reads the fixture name and what Scan reads of it.
func scannedFixture(tb testing.TB, name string) ([]byte, Meta) {
	tb.Helper()
	data := readFixture(tb, name)
	m, err := Scan(data)
	if err != nil {
		tb.Fatal(err)
	}
	return data, m
}
