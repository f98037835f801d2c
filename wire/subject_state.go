package wire

import (
	"fmt"
	"strings"
)

// stateFields are the placeholders a subject must hold in the state
// layout: together they name exactly one object of one resource.
// {cluster} is not among them: a stream that one bridge alone writes to
// needs no cluster token, but a stream shared by several clusters does
// (docs/nats.md).
var stateFields = []field{fieldGroup, fieldResource, fieldNamespace, fieldName}

// ServesState reports why the template cannot serve the state layout,
// where a subject's latest message is its object's state: each subject
// must name exactly one object, and an object must keep one subject for
// its whole life. {action} gives an object a subject per kind of change
// (a delete would not replace the object's state), and {version} a
// subject per served version (a change of the watched version would leave
// the objects' old messages behind for ever).
func (t *SubjectTemplate) ServesState() error {
	has := map[field]bool{}
	for _, p := range t.parts {
		has[p.f] = true
	}
	var problems []string
	for _, f := range []field{fieldAction, fieldVersion} {
		if has[f] {
			problems = append(problems, "must not hold "+f.String())
		}
	}
	var missing []string
	for _, f := range stateFields {
		if !has[f] {
			missing = append(missing, f.String())
		}
	}
	if len(missing) > 0 {
		problems = append(problems, "must hold "+strings.Join(missing, ", ")+" to name exactly one object")
	}
	if len(problems) > 0 {
		return fmt.Errorf("%s (the latest message of a subject is the state of its one object; use BRIDGE_NATS_LAYOUT=history for this subject)",
			strings.Join(problems, " and "))
	}
	return nil
}
