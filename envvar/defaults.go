package envvar

import (
	"fmt"

	"github.com/caarlos0/env/v11"
)

// Defaults sets every field of the configuration cfg points to (a struct
// whose fields carry env and envDefault tags, as the bridge's do) to its
// envDefault, as an environment that sets none of the variables would, and
// the other fields to their zero values. A configuration's DefaultConfig
// uses it, so that the defaults written by hand and those the bridge reads
// are the same tags.
//
// It panics when cfg is not a pointer to a struct, or when a default in
// its tags does not parse or a variable is required: mistakes in the
// type, which no input can cause.
func Defaults(cfg any) {
	// No variable is set, so only a default that does not parse can fail:
	// a mistake in the tags, which TestDefaults of each configuration
	// catches.
	if err := env.ParseWithOptions(cfg, env.Options{Environment: map[string]string{}}); err != nil {
		panic(fmt.Sprintf("envvar: a default of %T does not parse: %v", cfg, err))
	}
}
