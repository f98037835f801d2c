package filter

import (
	"fmt"
	"strings"
	"sync"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common"
	"github.com/google/cel-go/ext"
)

// CostLimit is the most one evaluation may cost, in units of CEL's cost
// model: Kubernetes' limit per expression (PerCallLimit), which its users
// already write expressions for.
const CostLimit = 1_000_000

// SourceName names the expression in compile errors.
const SourceName = "BRIDGE_FILTER"

// maxExprSize is the longest expression accepted, in code points: cel's own
// default, stated here because the source is built with it.
const maxExprSize = 100_000

// Variable names, as the expression writes them.
const (
	varObject    = "object"
	varResource  = "resource"
	varNamespace = "ns" // namespace is a reserved word in CEL

	varName        = "name"
	varLabels      = "labels"
	varAnnotations = "annotations"
)

// Filter is a compiled BRIDGE_FILTER. It is immutable: Match and Reads are
// safe for concurrent use.
type Filter struct {
	expr  string
	prg   cel.Program
	reads Reads
	// costLimited is whether prg tracks its cost (see costLimited).
	costLimited bool
}

// CompileError is an expression that does not compile: it does not parse,
// does not type-check, or is not bool. Issues is cel's text, positions and
// caret lines included, with the source named BRIDGE_FILTER.
type CompileError struct {
	Issues string
}

func (e *CompileError) Error() string { return "filter: " + e.Issues }

// env is the environment every filter compiles in; building it costs
// milliseconds, so it is built once. A cel.Env is safe for concurrent use.
var env = sync.OnceValues(func() (*cel.Env, error) {
	return cel.NewEnv(
		cel.Variable(varObject, cel.DynType),
		cel.Variable(varResource, cel.StringType),
		cel.Variable(varNamespace, cel.StringType),
		cel.Variable(varName, cel.StringType),
		cel.Variable(varLabels, cel.MapType(cel.StringType, cel.StringType)),
		cel.Variable(varAnnotations, cel.MapType(cel.StringType, cel.StringType)),
		cel.CrossTypeNumericComparisons(true),
		cel.DefaultUTCTimeZone(true),
		cel.OptionalTypes(),
		cel.ParserExpressionSizeLimit(maxExprSize),
		ext.Strings(),
		ext.Lists(),
		ext.Sets(),
		ext.Encoders(),
		ext.Math(),
		ext.Regex(),
		cel.ASTValidators(
			cel.ValidateDurationLiterals(),
			cel.ValidateTimestampLiterals(),
			regexLiterals{},
		),
	)
})

// Compile parses and type-checks expr, which must have the type bool, and
// builds its program. Errors are *CompileError.
func Compile(expr string) (f *Filter, err error) {
	// cel-go recovers its own panics; this is the last line, so that no
	// input can crash the bridge at start-up.
	defer func() {
		if r := recover(); r != nil {
			f, err = nil, &CompileError{Issues: fmt.Sprintf("ERROR: %s: internal error compiling the expression: %v", SourceName, r)}
		}
	}()
	e, err := env()
	if err != nil {
		return nil, fmt.Errorf("filter: building the CEL environment: %w", err)
	}
	if strings.TrimSpace(expr) == "" {
		return nil, &CompileError{Issues: "ERROR: " + SourceName + ": the expression is empty"}
	}
	src, err := common.NewStringSourceWithLimit(expr, SourceName, maxExprSize)
	if err != nil {
		return nil, &CompileError{Issues: fmt.Sprintf("ERROR: %s: %v", SourceName, err)}
	}
	checked, iss := e.CompileSource(src)
	if iss.Err() != nil {
		text := iss.String()
		if strings.Contains(text, "reserved identifier: namespace") {
			text += "\n(namespace is a reserved word in CEL: the variable is ns, or write object.metadata.namespace)"
		}
		return nil, &CompileError{Issues: text}
	}
	if t := checked.OutputType(); !t.IsExactType(cel.BoolType) {
		iss := cel.NewIssuesWithSourceInfo(common.NewErrors(src), checked.NativeRep().SourceInfo())
		hint := ""
		if t.IsExactType(cel.DynType) {
			hint = " (compare it with a value: ... == true)"
		}
		iss.ReportErrorAtID(checked.NativeRep().Expr().ID(), "the expression has the type %s; it must be bool%s", t, hint)
		return nil, &CompileError{Issues: iss.String()}
	}
	opts := []cel.ProgramOption{cel.EvalOptions(cel.OptOptimize)}
	limited := costLimited(e, checked)
	if limited {
		opts = append(opts, cel.CostLimit(CostLimit))
	}
	prg, err := e.Program(checked, opts...)
	if err != nil {
		return nil, &CompileError{Issues: fmt.Sprintf("ERROR: %s: %v", SourceName, err)}
	}
	return &Filter{expr: expr, prg: prg, costLimited: limited, reads: analyse(checked.NativeRep())}, nil
}

// String returns the expression as written.
func (f *Filter) String() string { return f.expr }
