package guarantees

import (
	"flag"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
)

// indexHeading starts the page's index of tests, its last section.
const indexHeading = "\n## Where the tests are\n"

var (
	// testName is a test or fuzz target named in the text. A name followed
	// by a lone "*" is a pattern ("every `TestFault*`"), not a name.
	testName = regexp.MustCompile(`\b(?:Test|Fuzz)[A-Z][A-Za-z0-9_]*(\*\*|\*)?`)
	// indexRow is a row of the index: | TestName | [path](../path), ... |
	indexRow = regexp.MustCompile(`(?m)^\| ((?:Test|Fuzz)[A-Za-z0-9_]+) \| (.+) \|$`)
	fileLink = regexp.MustCompile(`\[([^\]]+)\]\(\.\./([^)]+)\)`)
)

// problems checks the page doc against the tree root and says what is
// wrong with it, nothing when it is right.
func problems(doc string, root fs.FS) []string {
	text, index, ok := strings.Cut(doc, indexHeading)
	if !ok {
		return []string{"no index of tests (" + strings.TrimSpace(indexHeading) + ")"}
	}
	named := map[string]bool{}
	for _, m := range testName.FindAllStringSubmatch(text, -1) {
		if m[1] == "*" {
			continue
		}
		named[strings.TrimSuffix(m[0], m[1])] = true
	}
	var out []string
	listed := map[string]bool{}
	for _, row := range indexRow.FindAllStringSubmatch(index, -1) {
		name := row[1]
		if listed[name] {
			out = append(out, name+": listed twice in the index")
		}
		listed[name] = true
		if !named[name] {
			out = append(out, name+": in the index, but the page does not name it")
		}
		links := fileLink.FindAllStringSubmatch(row[2], -1)
		if len(links) == 0 {
			out = append(out, name+": no file in the index")
		}
		def := regexp.MustCompile(`(?m)^func ` + name + `\(`)
		for _, l := range links {
			if l[1] != l[2] {
				out = append(out, name+": link text "+l[1]+" is not its target "+l[2])
			}
			if !strings.HasSuffix(l[2], "_test.go") {
				out = append(out, name+": "+l[2]+" is not a test file")
			}
			src, err := fs.ReadFile(root, l[2])
			switch {
			case err != nil:
				out = append(out, name+": "+err.Error())
			case !def.Match(src):
				out = append(out, name+": not defined in "+l[2])
			}
		}
	}
	for name := range named {
		if !listed[name] {
			out = append(out, name+": named by the page, missing from the index")
		}
	}
	slices.Sort(out)
	return out
}

var update = flag.Bool("update", false, "rewrite the index of tests of docs/guarantees.md from the tree")

// index is the index of tests for the names doc's text gives: each name
// with every test file of root that defines it.
func index(doc string, root fs.FS) (string, error) {
	text, _, _ := strings.Cut(doc, indexHeading)
	files := map[string][]string{}
	for _, m := range testName.FindAllStringSubmatch(text, -1) {
		if m[1] != "*" {
			files[strings.TrimSuffix(m[0], m[1])] = nil
		}
	}
	defs := map[string]*regexp.Regexp{}
	for name := range files {
		defs[name] = regexp.MustCompile(`(?m)^func ` + name + `\(`)
	}
	err := fs.WalkDir(root, ".", func(path string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && path != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata"):
			return fs.SkipDir
		case d.IsDir() || !strings.HasSuffix(path, "_test.go"):
			return nil
		}
		src, err := fs.ReadFile(root, path)
		if err != nil {
			return err
		}
		for name, def := range defs {
			if def.Match(src) {
				files[name] = append(files[name], path)
			}
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s\nEvery test named above, and the file it is in (a name that several\n"+
		"packages use lists each). `test/guarantees` checks that this table lists\n"+
		"every test the page names, and that each is in its file; `go test\n"+
		"./test/guarantees -update` rewrites it.\n\n| test | file |\n|---|---|\n", indexHeading)
	for _, name := range slices.Sorted(maps.Keys(files)) {
		var links []string
		for _, f := range files[name] {
			links = append(links, "["+f+"](../"+f+")")
		}
		fmt.Fprintf(&b, "| %s | %s |\n", name, strings.Join(links, ", "))
	}
	return strings.TrimRight(text, "\n") + "\n" + b.String(), nil
}

// docs/guarantees.md names only tests that exist, each in the file its
// index gives. With -update, the index is written from the tree first.
func TestGuaranteesNameTestsThatExist(t *testing.T) {
	doc, err := os.ReadFile("../../docs/guarantees.md")
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		s, err := index(string(doc), os.DirFS("../.."))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile("../../docs/guarantees.md", []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		doc = []byte(s)
	}
	for _, p := range problems(string(doc), os.DirFS("../..")) {
		t.Error("docs/guarantees.md: " + p)
	}
}

// The check finds each way the page can be wrong.
func TestProblemsFindsEachMistake(t *testing.T) {
	tree := fstest.MapFS{
		"a/a_test.go": {Data: []byte("package a\n\nfunc TestA(t *testing.T) {}\n\nfunc FuzzA(f *testing.F) {}\n")},
		"b/b.go":      {Data: []byte("package b\n\nfunc TestB(t *testing.T) {}\n")},
	}
	index := func(rows ...string) string {
		return indexHeading + "\n| test | file |\n|---|---|\n" + strings.Join(rows, "\n") + "\n"
	}
	for _, tt := range []struct {
		name, doc string
		want      []string
	}{
		{"right", "TestA and FuzzA, every `TestFault*`, **TestA**." + index(
			"| TestA | [a/a_test.go](../a/a_test.go) |", "| FuzzA | [a/a_test.go](../a/a_test.go) |"), nil},
		{"no index", "TestA", []string{"no index of tests (## Where the tests are)"}},
		{"not in the index", "TestA, TestGone" + index("| TestA | [a/a_test.go](../a/a_test.go) |"),
			[]string{"TestGone: named by the page, missing from the index"}},
		{"not named", "TestA" + index("| TestA | [a/a_test.go](../a/a_test.go) |", "| FuzzA | [a/a_test.go](../a/a_test.go) |"),
			[]string{"FuzzA: in the index, but the page does not name it"}},
		{"not in its file", "TestA, TestC" + index("| TestA | [a/a_test.go](../a/a_test.go) |", "| TestC | [a/a_test.go](../a/a_test.go) |"),
			[]string{"TestC: not defined in a/a_test.go"}},
		{"no such file", "TestA" + index("| TestA | [a/x_test.go](../a/x_test.go) |"),
			[]string{"TestA: open a/x_test.go: file does not exist"}},
		{"not a test file", "TestB" + index("| TestB | [b/b.go](../b/b.go) |"),
			[]string{"TestB: b/b.go is not a test file"}},
		{"link mismatch", "TestA" + index("| TestA | [a/b_test.go](../a/a_test.go) |"),
			[]string{"TestA: link text a/b_test.go is not its target a/a_test.go"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := problems(tt.doc, tree); !slices.Equal(got, tt.want) {
				t.Errorf("problems = %q, want %q", got, tt.want)
			}
		})
	}
}
