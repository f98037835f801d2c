package filter

import (
	"testing"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/ast"
)

// TestCostEstimate: a filter runs without the cost limit only when cel's
// estimate of its cost, on variables of at most maxValueSize, is within
// CostLimit; and on the Pod fixture each such filter costs at most its
// estimate plus the slack, measured with cel's runtime cost tracking. The
// typical filters of the benchmarks run without it.
func TestCostEstimate(t *testing.T) {
	vars := varsOf("pods", podFixture(t))
	exprs := []string{
		`lists.range(2000).all(a, lists.range(2000).exists(b, b == a))`,
		`object.items.all(a, object.items.all(b, a + b >= 0))`,
	}
	for _, bc := range benchExprs {
		exprs = append(exprs, bc.expr)
	}
	for _, tc := range readsCases {
		exprs = append(exprs, tc.expr)
	}
	e, err := env()
	if err != nil {
		t.Fatal(err)
	}
	unlimited := 0
	for _, expr := range exprs {
		f := mustCompile(t, expr)
		checked, iss := e.Compile(expr)
		if iss.Err() != nil {
			t.Fatal(iss.Err())
		}
		est, err := e.EstimateCost(checked, variableSizes{})
		if err != nil {
			t.Fatal(err)
		}
		if f.costLimited {
			continue
		}
		if est.Max > CostLimit {
			t.Errorf("%s: not cost limited with an estimate of %d", expr, est.Max)
		}
		unlimited++
		prg, err := e.Program(checked, cel.EvalOptions(cel.OptTrackCost))
		if err != nil {
			t.Fatal(err)
		}
		_, det, _ := prg.Eval((*activation)(vars))
		nodes := len(ast.MatchDescendants(ast.NavigateAST(checked.NativeRep()), func(ast.NavigableExpr) bool { return true }))
		if cost := det.ActualCost(); cost == nil || *cost > est.Max+costSlack*uint64(nodes) {
			t.Errorf("%s: actual cost %d over the estimate %d + %d × %d nodes", expr, *cost, est.Max, costSlack, nodes)
		}
	}
	if unlimited < 20 || unlimited == len(exprs) {
		t.Errorf("%d of %d filters run without the limit", unlimited, len(exprs))
	}
	for _, bc := range benchExprs[:2] {
		if mustCompile(t, bc.expr).costLimited {
			t.Errorf("%s: cost limited", bc.expr)
		}
	}
}
