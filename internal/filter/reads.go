package filter

import (
	"slices"

	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/common/types"
)

// Reads is what of its variables an expression reads.
//
// Paths are the member paths of object it selects: object.status.phase reads
// ["status" "phase"], object.spec.containers.exists(c, ...) reads
// ["spec" "containers"], has(object.a.b) reads ["a" "b"] (unless the
// expression reads a longer path under it, which decides b's presence too),
// object["a"].b and object.?a.?b read ["a" "b"]. A path is read whole:
// everything under its last member. No path is a prefix of another, and they
// are sorted.
//
// The result of Match is the same for an object restricted to Paths as for
// the whole object when the restricted object holds, for each path, the
// value at the path whole, and at each member before the last: an object
// (map) holding the members on the paths, or, when the value there is not an
// object, that value whole. An object without a member on a path lacks it
// in the restriction too.
//
// Whole is true when the expression uses object in a way the analysis does
// not follow (passed whole to a function, indexed with a value that is not
// a constant string, compared, iterated over): the whole object is needed;
// Paths is nil then. With neither Whole nor Paths, the expression does not
// read object at all.
//
// Labels and Annotations say whether the expression uses those variables.
type Reads struct {
	Paths               [][]string
	Whole               bool
	Labels, Annotations bool
}

// Reads returns what the expression reads. The result is the caller's.
func (f *Filter) Reads() Reads {
	r := f.reads
	r.Paths = make([][]string, len(f.reads.Paths))
	for i, p := range f.reads.Paths {
		r.Paths[i] = slices.Clone(p)
	}
	if f.reads.Paths == nil {
		r.Paths = nil
	}
	return r
}

// analyse computes Reads from a checked expression.
func analyse(a *ast.AST) Reads {
	var w walker
	w.expr(a.Expr())
	if w.reads.Whole {
		w.reads.Paths = nil
		return w.reads
	}
	w.reads.Paths = minimalPaths(append(w.reads.Paths, presenceOnly(w.presence, w.reads.Paths)...))
	return w.reads
}

// presenceOnly returns the paths has() tests that must be read for it:
// those that no path read is longer than. The presence of a member on the
// way to a path read is in the restricted object already (see Reads), so
// has(object.status) && object.status.phase == "Failed" reads status.phase,
// not the whole status.
func presenceOnly(presence, paths [][]string) [][]string {
	var out [][]string
	for _, p := range presence {
		if !slices.ContainsFunc(paths, func(q []string) bool {
			return len(q) > len(p) && slices.Equal(q[:len(p)], p)
		}) {
			out = append(out, p)
		}
	}
	return out
}

// walker walks an expression, keeping the names comprehensions bind in
// scope, so that an iteration variable named object is not taken for the
// variable.
type walker struct {
	reads Reads
	bound []string
	// presence are the paths has() tests.
	presence [][]string
}

// global reports whether name, used here, is the variable and not a name a
// comprehension binds.
func (w *walker) global(name string) bool { return !slices.Contains(w.bound, name) }

func (w *walker) expr(e ast.Expr) {
	if e == nil {
		return
	}
	switch e.Kind() {
	case ast.IdentKind:
		w.ident(e.AsIdent())
	case ast.SelectKind, ast.CallKind:
		root, steps := unwind(e)
		if len(steps) > 0 {
			if root.Kind() == ast.IdentKind && root.AsIdent() == varObject && w.global(varObject) {
				if e.Kind() == ast.SelectKind && e.AsSelect().IsTestOnly() {
					w.presence = append(w.presence, steps)
				} else {
					w.reads.Paths = append(w.reads.Paths, steps)
				}
				return
			}
			w.expr(root)
			return
		}
		if e.Kind() == ast.SelectKind {
			w.expr(e.AsSelect().Operand())
			return
		}
		c := e.AsCall()
		if c.IsMemberFunction() {
			w.expr(c.Target())
		}
		for _, arg := range c.Args() {
			w.expr(arg)
		}
	case ast.ComprehensionKind:
		c := e.AsComprehension()
		w.expr(c.IterRange())
		w.expr(c.AccuInit())
		n := len(w.bound)
		w.bound = append(w.bound, c.IterVar(), c.AccuVar())
		if c.HasIterVar2() {
			w.bound = append(w.bound, c.IterVar2())
		}
		w.expr(c.LoopCondition())
		w.expr(c.LoopStep())
		w.expr(c.Result())
		w.bound = w.bound[:n]
	case ast.ListKind:
		for _, el := range e.AsList().Elements() {
			w.expr(el)
		}
	case ast.MapKind:
		for _, entry := range e.AsMap().Entries() {
			m := entry.AsMapEntry()
			w.expr(m.Key())
			w.expr(m.Value())
		}
	case ast.StructKind:
		for _, field := range e.AsStruct().Fields() {
			w.expr(field.AsStructField().Value())
		}
	case ast.LiteralKind:
	default:
		// A kind this walk does not know may hide a use of object.
		w.reads.Whole = true
	}
}

func (w *walker) ident(name string) {
	if !w.global(name) {
		return
	}
	switch name {
	case varObject:
		w.reads.Whole = true
	case varLabels:
		w.reads.Labels = true
	case varAnnotations:
		w.reads.Annotations = true
	}
}

// unwind takes the member steps off a chain of selections, outermost last:
// a.b (a presence test too), a["b"], a.?b and a[?"b"], with constant string
// keys. It returns the expression the chain starts from and the steps,
// none when e is not a step.
func unwind(e ast.Expr) (ast.Expr, []string) {
	var rev []string
	for {
		if e.Kind() == ast.SelectKind {
			s := e.AsSelect()
			rev = append(rev, s.FieldName())
			e = s.Operand()
			continue
		}
		if e.Kind() == ast.CallKind {
			c := e.AsCall()
			switch c.FunctionName() {
			case operators.Index, operators.OptIndex, operators.OptSelect:
				args := c.Args()
				if !c.IsMemberFunction() && len(args) == 2 && args[1].Kind() == ast.LiteralKind {
					if key, ok := args[1].AsLiteral().(types.String); ok {
						rev = append(rev, string(key))
						e = args[0]
						continue
					}
				}
			}
		}
		break
	}
	slices.Reverse(rev)
	return e, rev
}

// minimalPaths sorts paths and leaves out each one that another one is a
// prefix of (or equal to): reading a path whole reads everything under it.
func minimalPaths(paths [][]string) [][]string {
	if len(paths) == 0 {
		return nil
	}
	slices.SortFunc(paths, slices.Compare)
	out := paths[:1]
	for _, p := range paths[1:] {
		last := out[len(out)-1]
		if len(p) >= len(last) && slices.Equal(p[:len(last)], last) {
			continue
		}
		out = append(out, p)
	}
	return out
}
