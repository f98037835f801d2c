// Package filter compiles and evaluates BRIDGE_FILTER, a CEL expression that
// decides which objects are in the stream.
//
// # Variables
//
//   - object (dyn): the object as the API server sent it, managedFields cut.
//     JSON objects are maps with string keys, arrays are lists, integers are
//     int (int64, as Kubernetes' unstructured decoding gives them), other
//     numbers double, and null is null.
//   - resource (string): the resource's name as source.Resource.Name() writes
//     it, "pods" or "deployments.apps".
//   - ns (string): the namespace, "" for cluster-scoped objects. namespace
//     is a reserved word in CEL and cannot name a variable;
//     object.metadata.namespace works too.
//   - name (string).
//   - labels, annotations (map(string, string)): the object's labels and
//     annotations, empty maps when it has none.
//
// # Libraries
//
// Exactly these are enabled, in the versions of the cel-go release the module
// requires:
//
//   - CEL's standard definitions and macros (has, all, exists, exists_one,
//     map, filter), with cross-type numeric comparisons (1 < 1.5, 2u == 2)
//     and UTC as the default time zone of timestamp functions.
//   - Optional types (object.?spec.?replicas.orValue(1), object[?"a"]), which
//     the regex library needs.
//   - The extension libraries ext.Strings (charAt, indexOf, lowerAscii,
//     split, format, ...), ext.Lists (flatten, slice, sort, range, ...),
//     ext.Sets (sets.contains, sets.intersects, sets.equivalent),
//     ext.Encoders (base64.encode, base64.decode), ext.Math (math.greatest,
//     math.least, math.abs, ...) and ext.Regex (regex.replace, regex.extract,
//     regex.extractAll).
//
// The pattern of matches() is compiled once, when the program is built, if it
// is a constant; constant patterns of matches() and of the regex library are
// checked at compile time, so a bad one is a compile error with its position.
// Constant duration() and timestamp() literals are checked at compile time
// too.
//
// # Compile errors
//
// Compile fails with a *CompileError when the expression does not parse, does
// not type-check (an unknown variable or function, a wrong argument type), or
// does not have the type bool. A dyn expression is not bool: object.spec.paused
// must be written object.spec.paused == true. The error's text is cel's, with
// the source named BRIDGE_FILTER, line:column and a caret line under the
// position:
//
//	ERROR: BRIDGE_FILTER:1:23: undeclared reference to 'objct' (in container '')
//	 | resource != "pods" || objct.status.phase != "Running"
//	 | ......................^
//
// # Cost limit
//
// Each evaluation may cost at most CostLimit (1,000,000) units of CEL's cost
// model, the limit Kubernetes sets per expression. An evaluation that goes
// over it stops and Match returns an error wrapping ErrCostLimitExceeded.
// Counting the cost as it goes costs about ten times what evaluating a
// simple filter does, so a filter that cannot go over the limit is evaluated
// without it: one without comprehensions (all, exists, map, ...) whose cost,
// as cel estimates it for values of at most 3 MiB (the API server's largest
// request), is within the limit. Counting takes time quadratic in the
// iterations of a comprehension (cel-go's cost tracker): over a list of
// 1,000 items an evaluation takes about 2 ms, over 10,000 about 0.1 s.
//
// # Runtime errors mean no match
//
// Selecting a member that is not there (no such key), applying an operator to
// a value of the wrong type (no such overload) or going over the cost limit
// is a runtime error. Match returns it, with false; the caller counts the
// object as not matching. CEL's || and && absorb an error when the other side
// decides the result: an error on one side of || with true on the other is
// true.
//
// Test for presence with has() before selecting a member that some objects
// lack. has(object.a.b) tests b only; a must be there (else it is a runtime
// error, no such key), so test each member that may be missing:
//
//	has(object.status) && has(object.status.phase) && object.status.phase == "Failed"
//	!has(object.spec.type) || object.spec.type != "LoadBalancer"
//
// or use optionals with a default, which stop at the first missing member:
//
//	object.?status.?phase.orValue("") == "Failed"
//
// # Numbers
//
// Integers in the object are int, so object.spec.replicas > 2 compares int
// with int. Comparisons across int, uint and double are numeric
// (object.spec.replicas > 2.5, object.spec.replicas == 3u), and so is
// equality: 3 == 3.0 is true.
//
// # What the expression reads
//
// Reads reports which members of object the expression reads, from the
// checked expression, so the caller can decode only those: evaluating on an
// object that holds only the members on Reads().Paths gives the result
// evaluating on the whole object gives. When the analysis cannot tell, Reads
// says Whole.
//
// # Concurrency
//
// A Filter is immutable after Compile; Match and Reads may be called from any
// number of goroutines at once.
package filter
