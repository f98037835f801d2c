package access

// This file is the rules file's format, as it is written. docs/replica-access.md
// describes it for operators; ParseRules turns it into [Rules].

// Identity of the format. A file with another apiVersion or kind is refused,
// so that a future format is never read as this one.
const (
	RulesAPIVersion = "replica.kubebus.io/v1"
	RulesKind       = "AccessRules"
)

// The subject kinds: a user is matched by name, a group by membership.
const (
	SubjectUser  = "User"
	SubjectGroup = "Group"
)

// Wildcard in clusters, apiGroups, resources, namespaces and verbs means
// every value; in resources it never includes secrets.
const Wildcard = "*"

type rulesDoc struct {
	APIVersion string     `json:"apiVersion"`
	Kind       string     `json:"kind"`
	Grants     []grantDoc `json:"grants"`
}

type grantDoc struct {
	Subjects []subjectDoc `json:"subjects"`
	Clusters []string     `json:"clusters"`
	Rules    []ruleDoc    `json:"rules"`
}

type subjectDoc struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
}

// ruleDoc is an RBAC PolicyRule with namespaces added. A nil Namespaces
// (omitted) means every namespace and the cluster-scoped resources; an
// empty one is an error. ResourceNames, as in RBAC, omitted or empty means
// every name. A nil here is always an omitted key: ParseRules refuses a
// null, which would otherwise read as nil and widen the rule.
type ruleDoc struct {
	APIGroups     []string `json:"apiGroups"`
	Resources     []string `json:"resources"`
	Namespaces    []string `json:"namespaces"`
	Verbs         []string `json:"verbs"`
	ResourceNames []string `json:"resourceNames"`
}
