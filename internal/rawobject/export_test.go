package rawobject

// For fixturegen_test.go, in the external test package, which makes the
// fixtures these read.
var (
	FixturePath = fixturePath
	ReadFixture = readFixture
)
