package publicapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/importer"
	"go/token"
	"go/types"
	"io"
	"iter"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// module is the path of the module whose API is checked.
const module = "github.com/kubebus/bridge"

// notAPI are the module's directories whose packages are not an API:
// commands, examples and the tests' helpers.
var notAPI = []string{"cmd", "examples", "test"}

// TestNoInternalTypesInPublicAPI lists every exported identifier of the
// module's public packages whose type names a type of an internal/
// package, and fails when there is one.
func TestNoInternalTypesInPublicAPI(t *testing.T) {
	pkgs, exports := listPackages(t)
	imp := importer.ForCompiler(token.NewFileSet(), "gc", func(path string) (io.ReadCloser, error) {
		f, ok := exports[path]
		if !ok {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(f)
	})
	for _, want := range []string{"source", "wire", "sink", "sink/nats", "sink/kafka", "checkpoint", "checkpoint/natskv", "checkpoint/kafkastore",
		"kafkaconn", "envvar", "resourceversion", "consumer", "consumer/nats", "consumer/kafka"} {
		if !slices.Contains(pkgs, module+"/"+want) {
			t.Fatalf("%s is not among the public packages found: %v", want, pkgs)
		}
	}
	var all []string
	for _, path := range pkgs {
		pkg, err := imp.Import(path)
		if err != nil {
			t.Fatalf("import %s: %v", path, err)
		}
		all = append(all, violations(pkg)...)
	}
	if len(all) > 0 {
		t.Errorf("%d exported identifiers of public packages name internal types, which code outside the module cannot name:\n\t%s",
			len(all), strings.Join(all, "\n\t"))
	}
}

// The check must find an internal type wherever an exported API can hold
// one, and nothing else.
func TestViolationsFound(t *testing.T) {
	internal := types.NewPackage(module+"/internal/secret", "secret")
	hidden := types.NewNamed(types.NewTypeName(0, internal, "Key", nil), types.Typ[types.String], nil)
	pub := types.NewPackage(module+"/pub", "pub")
	scope := pub.Scope()
	field := func(name string, typ types.Type, embedded bool) *types.Var {
		return types.NewField(0, pub, name, typ, embedded)
	}
	param := func(typ types.Type) *types.Tuple { return types.NewTuple(types.NewParam(0, pub, "", typ)) }
	named := func(name string, under types.Type) *types.Named {
		n := types.NewNamed(types.NewTypeName(0, pub, name, nil), under, nil)
		scope.Insert(n.Obj())
		return n
	}
	// Caught: a field, an embedded field, a map's value, a function's
	// result, an interface's method, a method, a variable, and an
	// unexported type that an exported function returns.
	named("Config", types.NewStruct([]*types.Var{field("Key", hidden, false), field("ok", hidden, false)}, nil))
	named("Embeds", types.NewStruct([]*types.Var{field("Key", hidden, true)}, nil))
	named("ByName", types.NewMap(types.Typ[types.String], types.NewPointer(hidden)))
	scope.Insert(types.NewFunc(0, pub, "Open", types.NewSignatureType(nil, nil, nil, nil, param(hidden), false)))
	iface := types.NewInterfaceType([]*types.Func{types.NewFunc(0, pub, "Apply", types.NewSignatureType(nil, nil, nil, param(hidden), nil, false))}, nil)
	iface.Complete()
	named("View", iface)
	withMethod := named("Store", types.NewStruct(nil, nil))
	recv := types.NewParam(0, pub, "s", types.NewPointer(withMethod))
	withMethod.AddMethod(types.NewFunc(0, pub, "Conn", types.NewSignatureType(recv, nil, nil, nil, param(hidden), false)))
	withMethod.AddMethod(types.NewFunc(0, pub, "conn", types.NewSignatureType(recv, nil, nil, nil, param(hidden), false)))
	scope.Insert(types.NewVar(0, pub, "Default", hidden))
	unexported := named("settings", types.NewStruct([]*types.Var{field("Key", hidden, false)}, nil))
	scope.Insert(types.NewFunc(0, pub, "Parse", types.NewSignatureType(nil, nil, nil, nil, param(types.NewPointer(unexported)), false)))
	// An alias of an internal type, and what an unexported embedded type
	// promotes: its exported fields and methods.
	scope.Insert(types.NewAlias(types.NewTypeName(0, pub, "KeyAlias", nil), hidden).Obj())
	inner := types.NewNamed(types.NewTypeName(0, pub, "inner", nil), types.NewStruct([]*types.Var{field("Secret", hidden, false)}, nil), nil)
	innerRecv := types.NewParam(0, pub, "i", inner)
	inner.AddMethod(types.NewFunc(0, pub, "Reveal", types.NewSignatureType(innerRecv, nil, nil, nil, param(hidden), false)))
	named("Outer", types.NewStruct([]*types.Var{field("inner", inner, true)}, nil))
	// A type parameter's constraint, of a type and of a function, even
	// where no parameter uses it.
	constraint := types.NewInterfaceType(nil, []types.Type{types.NewPointer(hidden)})
	constraint.Complete()
	boxed := types.NewNamed(types.NewTypeName(0, pub, "Box", nil), nil, nil)
	boxed.SetTypeParams([]*types.TypeParam{types.NewTypeParam(types.NewTypeName(0, pub, "T", nil), constraint)})
	boxed.SetUnderlying(types.NewStruct(nil, nil))
	scope.Insert(boxed.Obj())
	fnTP := types.NewTypeParam(types.NewTypeName(0, pub, "T", nil), constraint)
	scope.Insert(types.NewFunc(0, pub, "Generic", types.NewSignatureType(nil, nil, []*types.TypeParam{fnTP}, nil, nil, false)))
	// Not caught: unexported fields, methods and identifiers.
	scope.Insert(types.NewVar(0, pub, "fallback", hidden))

	got := violations(pub)
	want := []string{
		"pub.Box: github.com/kubebus/bridge/internal/secret.Key",
		"pub.ByName: github.com/kubebus/bridge/internal/secret.Key",
		"pub.Config.Key: github.com/kubebus/bridge/internal/secret.Key",
		"pub.Default: github.com/kubebus/bridge/internal/secret.Key",
		"pub.Embeds.Key: github.com/kubebus/bridge/internal/secret.Key",
		"pub.Generic: github.com/kubebus/bridge/internal/secret.Key",
		"pub.KeyAlias: github.com/kubebus/bridge/internal/secret.Key",
		"pub.Open: github.com/kubebus/bridge/internal/secret.Key",
		"pub.Outer: pub.inner.Reveal: github.com/kubebus/bridge/internal/secret.Key",
		"pub.Outer: pub.inner.Secret: github.com/kubebus/bridge/internal/secret.Key",
		"pub.Parse: pub.settings.Key: github.com/kubebus/bridge/internal/secret.Key",
		"pub.Store.Conn: github.com/kubebus/bridge/internal/secret.Key",
		"pub.View.Apply: github.com/kubebus/bridge/internal/secret.Key",
	}
	if !slices.Equal(got, want) {
		t.Errorf("found\n\t%s\nwant\n\t%s", strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
	}
}

// listPackages returns the module's public packages, and the export data
// file of each of them and of every package they depend on, built by the
// go command.
func listPackages(t *testing.T) (public []string, exports map[string]string) {
	t.Helper()
	for p := range goList(t, module+"/...") {
		if isAPI(p.ImportPath) {
			public = append(public, p.ImportPath)
		}
	}
	exports = map[string]string{}
	for p := range goList(t, append([]string{"-export", "-deps"}, public...)...) {
		exports[p.ImportPath] = p.Export
	}
	return public, exports
}

// listed is what goList reads of a package.
type listed struct {
	ImportPath, Export string
	Error              *struct{ Err string }
}

// goList runs go list -json with args, and yields the packages it lists.
func goList(t *testing.T, args ...string) iter.Seq[listed] {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list", "-e", "-json=ImportPath,Export,Error"}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.Bytes())
	}
	return func(yield func(listed) bool) {
		dec := json.NewDecoder(bytes.NewReader(out))
		for {
			var p listed
			if err := dec.Decode(&p); errors.Is(err, io.EOF) {
				return
			} else if err != nil {
				t.Fatalf("go list: %v", err)
			}
			if p.Error != nil {
				t.Fatalf("go list: %s: %s", p.ImportPath, p.Error.Err)
			}
			if !yield(p) {
				return
			}
		}
	}
}

// isAPI reports whether the package at path is part of the module's API.
func isAPI(path string) bool {
	rel := strings.TrimPrefix(strings.TrimPrefix(path, module), "/")
	for _, dir := range strings.Split(rel, "/") {
		if dir == "internal" {
			return false
		}
	}
	top, _, _ := strings.Cut(rel, "/")
	return !slices.Contains(notAPI, top)
}

// isInternal reports whether pkg is an internal package, of this module
// or of any other.
func isInternal(pkg *types.Package) bool {
	return pkg != nil && slices.Contains(strings.Split(pkg.Path(), "/"), "internal")
}

// violations lists the exported identifiers of pkg whose types name an
// internal type, each as "pkg.Ident[.Member]: the internal type", sorted.
func violations(pkg *types.Package) []string {
	var out []string
	scope := pkg.Scope()
	for _, name := range scope.Names() {
		obj := scope.Lookup(name)
		if !obj.Exported() {
			continue
		}
		w := walker{seen: map[types.Type]bool{}}
		where := strings.TrimPrefix(pkg.Path(), module+"/") + "." + name
		switch o := obj.(type) {
		case *types.TypeName:
			w.typeDecl(where, o.Type())
		default:
			w.walk(where, obj.Type())
		}
		out = append(out, w.found...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// walker walks the types an exported identifier shows, recording each
// internal type it meets.
type walker struct {
	seen  map[types.Type]bool
	found []string
}

// typeDecl walks what a declared type shows: its underlying type and its
// exported methods, on the value and on the pointer.
func (w *walker) typeDecl(where string, t types.Type) {
	if named, ok := types.Unalias(t).(*types.Named); ok {
		w.seen[named] = true
		for tp := range named.TypeParams().TypeParams() {
			w.walk(where, tp)
		}
		if isInternal(named.Obj().Pkg()) {
			// An alias of an internal type, or a type defined on one.
			w.found = append(w.found, fmt.Sprintf("%s: %s", where, named.Obj().Pkg().Path()+"."+named.Obj().Name()))
		}
		for m := range named.Methods() {
			if m.Exported() {
				w.walk(where+"."+m.Name(), m.Type())
			}
		}
	}
	w.walk(where, t.Underlying())
}

// walk records every internal type that t names and code outside the
// package can reach: exported fields and methods only.
func (w *walker) walk(where string, t types.Type) {
	switch t := types.Unalias(t).(type) {
	case *types.Named:
		obj := t.Obj()
		if isInternal(obj.Pkg()) {
			w.found = append(w.found, fmt.Sprintf("%s: %s.%s", where, obj.Pkg().Path(), obj.Name()))
			return
		}
		for a := range t.TypeArgs().Types() {
			w.walk(where, a)
		}
		// An exported type of a public package is checked as an
		// identifier of its own; an unexported one is checked here,
		// where an exported identifier shows it.
		if obj.Exported() || obj.Pkg() == nil || w.seen[t] {
			return
		}
		w.seen[t] = true
		w.typeDecl(where+": "+obj.Pkg().Name()+"."+obj.Name(), t)
	case *types.Pointer:
		w.walk(where, t.Elem())
	case *types.Slice:
		w.walk(where, t.Elem())
	case *types.Array:
		w.walk(where, t.Elem())
	case *types.Map:
		w.walk(where, t.Key())
		w.walk(where, t.Elem())
	case *types.Chan:
		w.walk(where, t.Elem())
	case *types.Struct:
		for f := range t.Fields() {
			switch {
			case f.Exported():
				w.walk(where+"."+f.Name(), f.Type())
			case f.Embedded():
				// Its exported fields and methods are promoted.
				w.walk(where, f.Type())
			}
		}
	case *types.Interface:
		for m := range t.Methods() {
			if m.Exported() {
				w.walk(where+"."+m.Name(), m.Type())
			}
		}
		for e := range t.EmbeddedTypes() {
			w.walk(where, e)
		}
	case *types.Signature:
		for tp := range t.TypeParams().TypeParams() {
			w.walk(where, tp)
		}
		for p := range t.Params().Variables() {
			w.walk(where, p.Type())
		}
		for r := range t.Results().Variables() {
			w.walk(where, r.Type())
		}
	case *types.Union:
		for term := range t.Terms() {
			w.walk(where, term.Type())
		}
	case *types.TypeParam:
		// A constraint may name its own type parameter.
		if w.seen[t] {
			return
		}
		w.seen[t] = true
		w.walk(where, t.Constraint())
	}
}
