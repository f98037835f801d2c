package filter

import (
	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/checker"
	"github.com/google/cel-go/common/ast"
)

// maxValueSize bounds the size (characters of a string, items of a list,
// entries of a map) of any value the variables hold: the API server refuses
// request bodies over 3 MiB, so no object, and nothing in it, is larger.
const maxValueSize = 3 << 20

// variableSizes is a cost estimator that knows the variables' values are at
// most maxValueSize large. Values computed in the expression keep cel's own
// estimates (unknown: unbounded).
type variableSizes struct{}

func (variableSizes) EstimateSize(n checker.AstNode) *checker.SizeEstimate {
	if len(n.Path()) == 0 {
		return nil
	}
	return &checker.SizeEstimate{Min: 0, Max: maxValueSize}
}

func (variableSizes) EstimateCallCost(string, string, *checker.AstNode, []checker.AstNode) *checker.CallEstimate {
	return nil
}

// costLimited reports whether a program needs the cost limit at run time.
// Tracking the cost costs about ten times what the evaluation of a simple
// expression does, so it is left out when the expression cannot go over the
// limit: it has no comprehension (so each node is evaluated at most once)
// and cel's estimate of its cost on variables of at most maxValueSize, plus
// slack for the unit per selection that the runtime counts and the estimate
// does not, is within CostLimit.
func costLimited(e *cel.Env, checked *cel.Ast) bool {
	root := ast.NavigateAST(checked.NativeRep())
	nodes, comprehensions := 0, 0
	ast.MatchDescendants(root, func(n ast.NavigableExpr) bool {
		nodes++
		if n.Kind() == ast.ComprehensionKind {
			comprehensions++
		}
		return false
	})
	if comprehensions > 0 {
		return true
	}
	est, err := e.EstimateCost(checked, variableSizes{})
	return err != nil || est.Max > CostLimit || costSlack*uint64(nodes) > CostLimit-est.Max
}

// costSlack is the runtime cost per node the estimate may leave out: one
// unit per selection, doubled for safety; TestCostEstimate measures it.
const costSlack = 2
