package config

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// Help writes every variable, its default and its meaning to w.
func Help(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "VARIABLE\tDEFAULT\tMEANING")
	for name, f := range variables() {
		def, ok := defaultOf(name, f)
		if !ok {
			def = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", name, def, f.Tag.Get("help"))
	}
	return tw.Flush()
}
