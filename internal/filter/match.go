package filter

import (
	"errors"
	"fmt"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/interpreter"
)

// ErrCostLimitExceeded is wrapped by the error of an evaluation that went
// over CostLimit.
var ErrCostLimitExceeded = errors.New("filter: cost limit exceeded")

// Vars are an object's variables (Namespace is the variable ns). Object
// holds at least the members on Reads().Paths (see Reads for how), or the
// whole object when Reads says Whole; nil is an empty object. Nil Labels and
// Annotations are empty maps. Match does not modify them.
type Vars struct {
	Resource, Namespace, Name string
	Object                    map[string]any
	Labels, Annotations       map[string]string
}

// Match evaluates the filter on v. A runtime error (no such key, wrong type,
// cost limit exceeded) is returned, wrapped, with false: the object does not
// match. Match is safe for concurrent use.
func (f *Filter) Match(v *Vars) (bool, error) {
	out, _, err := f.prg.Eval((*activation)(v))
	if err != nil {
		var cancelled interpreter.EvalCancelledError
		if errors.As(err, &cancelled) && cancelled.Cause == interpreter.CostLimitExceeded {
			return false, fmt.Errorf("%w (%d per evaluation): %w", ErrCostLimitExceeded, CostLimit, err)
		}
		return false, fmt.Errorf("filter: evaluation failed: %w", err)
	}
	b, ok := out.(types.Bool)
	if !ok {
		// The type check made the expression bool; this guards the bridge
		// against a cel-go that disagrees.
		return false, fmt.Errorf("filter: the expression gave %s, not a bool", out.Type().TypeName())
	}
	return bool(b), nil
}

// activation resolves the variables from Vars when the program asks for
// them, so that a variable the expression does not use costs nothing: cel
// adapts a Go map to a CEL map lazily, member by member.
type activation Vars

// emptyObject stands for a nil Object; cel only reads it.
var emptyObject = map[string]any{}

func (a *activation) ResolveName(name string) (any, bool) {
	switch name {
	case varObject:
		if a.Object == nil {
			return emptyObject, true
		}
		return a.Object, true
	case varResource:
		return a.Resource, true
	case varNamespace:
		return a.Namespace, true
	case varName:
		return a.Name, true
	case varLabels:
		return a.Labels, true
	case varAnnotations:
		return a.Annotations, true
	}
	return nil, false
}

func (a *activation) Parent() interpreter.Activation { return nil }
