package jsonenc

// Limits, for the tests of the package's behaviour around them.
const (
	MaxDepth        = maxDepth
	MaxPooledFields = maxPooledFields
)
