package filter

import (
	"regexp"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/overloads"
	"github.com/google/cel-go/common/types"
)

// regexLiterals reports a constant pattern that does not compile, at the
// pattern's position, for matches() and the regex library's functions.
// cel's own ValidateRegexLiterals names neither the pattern nor what is wrong
// with it.
type regexLiterals struct{}

// regexFunctions are the global functions whose second argument is a
// pattern: matches(s, re) and ext.Regex's.
var regexFunctions = map[string]bool{
	overloads.Matches:  true,
	"regex.replace":    true,
	"regex.extract":    true,
	"regex.extractAll": true,
}

func (regexLiterals) Name() string { return "bridge.filter.regexLiterals" }

func (regexLiterals) Validate(_ *cel.Env, _ cel.ValidatorConfig, a *ast.AST, iss *cel.Issues) {
	calls := ast.MatchDescendants(ast.NavigateAST(a), func(e ast.NavigableExpr) bool {
		return e.Kind() == ast.CallKind && regexFunctions[e.AsCall().FunctionName()]
	})
	for _, call := range calls {
		c := call.AsCall()
		i := 1 // matches(s, re), regex.replace(s, re, ...)
		if c.IsMemberFunction() {
			i = 0 // s.matches(re)
		}
		args := c.Args()
		if i >= len(args) || args[i].Kind() != ast.LiteralKind {
			continue
		}
		pattern, ok := args[i].AsLiteral().(types.String)
		if !ok {
			continue
		}
		if _, err := regexp.Compile(string(pattern)); err != nil {
			iss.ReportErrorAtID(args[i].ID(), "invalid regular expression %q: %v", string(pattern), err)
		}
	}
}
