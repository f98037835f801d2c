package source

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
)

// All is the pattern that selects every resource that supports list and
// watch.
const All = "*"

// NoExclusions, alone in the exclusions, excludes nothing.
const NoExclusions = "none"

// secrets is never selected by a pattern, only by name: a bus is read by
// many, so a secret on it is a leak, and RBAC, which can only grant, cannot
// take secrets out of a grant on every resource.
var secrets = schema.GroupResource{Resource: "secrets"}

// Selection is which resources to watch: resources named as kubectl names
// them, and patterns, "*" (every resource that supports list and watch)
// and "*.<group>" (every resource of the group, or of a group ending in
// ".<group>"), minus exclusions. Exclusions, names and group patterns,
// apply to what the patterns select: a resource named is always watched.
// Secrets are selected only by name. Make one with NewSelection; the zero
// value selects nothing.
type Selection struct {
	names []string
	all   bool
	// groups are the groups of the "*.<group>" patterns.
	groups []string
	// exclude are the names excluded, excludeGroups the groups of the
	// excluded patterns.
	exclude       []string
	excludeGroups []string
}

// SelectionError is a pattern or name NewSelection does not take.
type SelectionError struct {
	// Exclusion is true for an entry of the exclusions, false for one of
	// the resources.
	Exclusion bool
	Entry     string
	Reason    string
}

func (e *SelectionError) Error() string {
	return fmt.Sprintf("source: %q: %s", e.Entry, e.Reason)
}

// NewSelection parses resources (names and patterns) and exclusions
// (names and group patterns; NoExclusions alone for none). Every entry
// it does not take is reported, joined, each a *SelectionError.
func NewSelection(resources, exclusions []string) (Selection, error) {
	var s Selection
	var errs []error
	bad := func(exclusion bool, entry, format string, args ...any) {
		errs = append(errs, &SelectionError{Exclusion: exclusion, Entry: entry, Reason: fmt.Sprintf(format, args...)})
	}
	if len(resources) == 0 {
		bad(false, "", "name at least one resource, for example configmaps, or * for every resource")
	}
	for _, r := range resources {
		switch group, pattern, err := parsePattern(r); {
		case err != nil:
			bad(false, r, "%v", err)
		case pattern && group == "":
			s.all = true
		case pattern:
			if !slices.Contains(s.groups, group) {
				s.groups = append(s.groups, group)
			}
		default:
			if !slices.Contains(s.names, r) {
				s.names = append(s.names, r)
			}
		}
	}
	if len(exclusions) == 1 && exclusions[0] == NoExclusions {
		exclusions = nil
	}
	for _, e := range exclusions {
		switch group, pattern, err := parsePattern(e); {
		case err != nil:
			bad(true, e, "%v", err)
		case e == NoExclusions:
			bad(true, e, "%s excludes nothing, and only alone", NoExclusions)
		case pattern && group == "":
			bad(true, e, "%s would exclude every resource; name resources or groups (*.<group>)", All)
		case pattern:
			s.excludeGroups = append(s.excludeGroups, group)
		default:
			if msgs := validation.IsDNS1123Subdomain(e); len(msgs) > 0 {
				bad(true, e, "not a resource name (resource.group, as in leases.coordination.k8s.io): %s", strings.Join(msgs, "; "))
				continue
			}
			s.exclude = append(s.exclude, e)
		}
	}
	if len(errs) > 0 {
		return Selection{}, errors.Join(errs...)
	}
	return s, nil
}

// parsePattern tells a pattern ("*" or "*.<group>") from a name; group is
// "" for "*".
func parsePattern(entry string) (group string, pattern bool, err error) {
	if entry == "" {
		return "", false, errors.New("empty")
	}
	if entry == All {
		return "", true, nil
	}
	rest, ok := strings.CutPrefix(entry, All+".")
	if !ok {
		if strings.Contains(entry, "*") {
			return "", false, fmt.Errorf("not a pattern: a pattern is %s or %s.<group>, as in *.example.com", All, All)
		}
		return "", false, nil
	}
	if strings.Contains(rest, "*") {
		return "", false, fmt.Errorf("not a pattern: a pattern is %s or %s.<group>, as in *.example.com", All, All)
	}
	if msgs := validation.IsDNS1123Subdomain(rest); len(msgs) > 0 {
		return "", false, fmt.Errorf("%q is not a group name: %s", rest, strings.Join(msgs, "; "))
	}
	return rest, true, nil
}

// Names are the resources named, as given.
func (s Selection) Names() []string { return slices.Clone(s.names) }

// Patterned reports whether the selection has a pattern: what it selects
// then follows the resources the cluster serves.
func (s Selection) Patterned() bool { return s.all || len(s.groups) > 0 }

// String writes the selection as its entries, patterns after names.
func (s Selection) String() string {
	entries := slices.Clone(s.names)
	if s.all {
		entries = append(entries, All)
	}
	for _, g := range s.groups {
		entries = append(entries, All+"."+g)
	}
	return strings.Join(entries, ",")
}

// Selects reports whether a pattern of the selection selects gvr (see
// matches); a resource named is selected by name, not by this.
func (s Selection) Selects(gvr schema.GroupVersionResource) bool { return s.matches(gvr) }

// matches reports whether a pattern selects gvr: it is of a group a
// pattern names (or a subgroup of one), not excluded, and not secrets.
func (s Selection) matches(gvr schema.GroupVersionResource) bool {
	gr := gvr.GroupResource()
	if gr == secrets || !(s.all || slices.ContainsFunc(s.groups, func(g string) bool { return inGroup(gr.Group, g) })) {
		return false
	}
	return !s.excluded(gvr)
}

// excluded reports whether an exclusion names gvr (as resource.group, or
// resource.version.group) or its group.
func (s Selection) excluded(gvr schema.GroupVersionResource) bool {
	if slices.ContainsFunc(s.excludeGroups, func(g string) bool { return inGroup(gvr.Group, g) }) {
		return true
	}
	name := gvr.GroupResource().String()
	versioned := gvr.Resource + "." + gvr.Version
	if gvr.Group != "" {
		versioned += "." + gvr.Group
	}
	return slices.ContainsFunc(s.exclude, func(e string) bool { return e == name || e == versioned })
}

// unmatchedExclusions are the exclusions, as given, that exclude none of
// served.
func (s Selection) unmatchedExclusions(served []schema.GroupVersionResource) []string {
	var out []string
	for _, g := range s.excludeGroups {
		if !slices.ContainsFunc(served, func(gvr schema.GroupVersionResource) bool { return inGroup(gvr.Group, g) }) {
			out = append(out, All+"."+g)
		}
	}
	for _, e := range s.exclude {
		only := Selection{exclude: []string{e}}
		if !slices.ContainsFunc(served, only.excluded) {
			out = append(out, e)
		}
	}
	return out
}

// inGroup reports whether group is g or a subgroup of it (ends in ".g").
func inGroup(group, g string) bool {
	return group == g || strings.HasSuffix(group, "."+g)
}
