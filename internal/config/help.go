package config

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// Help writes every variable, its default and its meaning to w.
func Help(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "VARIABLE\tDEFAULT\tMEANING")
	for f := range variables() {
		name, _, _ := strings.Cut(f.Tag.Get("env"), ",")
		def, ok := f.Tag.Lookup("envDefault")
		if !ok {
			def = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", name, def, f.Tag.Get("help"))
	}
	return tw.Flush()
}
