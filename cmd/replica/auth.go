package main

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"slices"

	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/request/bearertoken"
	"k8s.io/apiserver/pkg/authentication/request/union"
	x509request "k8s.io/apiserver/pkg/authentication/request/x509"
	"k8s.io/apiserver/pkg/authentication/token/tokenfile"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"sigs.k8s.io/yaml"

	"github.com/kubebus/bridge/internal/replica"
)

// newAuthenticator accepts client certificates signed by the CAs of
// caFile and the bearer tokens of tokenFile (either may be empty, not
// both). The access package's NewAuthenticator replaces it when it lands.
func newAuthenticator(caFile, tokenFile string) (authenticator.Request, *x509.CertPool, error) {
	var auths []authenticator.Request
	var pool *x509.CertPool
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, nil, fmt.Errorf("REPLICA_CLIENT_CA_FILE: %w", err)
		}
		pool = x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, nil, fmt.Errorf("REPLICA_CLIENT_CA_FILE: %s holds no PEM certificate", caFile)
		}
		opts := x509request.DefaultVerifyOptions()
		opts.Roots = pool
		auths = append(auths, x509request.New(opts, x509request.CommonNameUserConversion))
	}
	if tokenFile != "" {
		tokens, err := tokenfile.NewCSV(tokenFile)
		if err != nil {
			return nil, nil, fmt.Errorf("REPLICA_TOKEN_FILE: %w", err)
		}
		auths = append(auths, bearertoken.New(tokens))
	}
	if len(auths) == 0 {
		return nil, nil, errors.New("REPLICA_CLIENT_CA_FILE or REPLICA_TOKEN_FILE: one is required")
	}
	return union.New(auths...), pool, nil
}

// rules is a stand-in for the access package's rules, until it lands: a
// user (or a member of a group) a rule names may get, list and watch
// every resource but Secrets, and read discovery, in the clusters it
// names ("*" for every one, the all-clusters view included).
type rules struct {
	Rules []rule `json:"rules"`
}

type rule struct {
	Users    []string `json:"users"`
	Groups   []string `json:"groups"`
	Clusters []string `json:"clusters"`
}

func loadRules(path string) (*rules, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("REPLICA_RULES_FILE: %w", err)
	}
	var r rules
	if err := yaml.UnmarshalStrict(b, &r); err != nil {
		return nil, fmt.Errorf("REPLICA_RULES_FILE: %s: %w", path, err)
	}
	return &r, nil
}

// clusterOf is the cluster of the request ctx belongs to.
var clusterOf = replica.ClusterFrom

func (r *rules) Authorize(ctx context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	cluster, _ := clusterOf(ctx)
	u := a.GetUser()
	if u == nil {
		return authorizer.DecisionNoOpinion, "no user", nil
	}
	if a.IsResourceRequest() && a.GetResource() == "secrets" && a.GetAPIGroup() == "" {
		return authorizer.DecisionNoOpinion, "no rule names secrets", nil
	}
	for _, rl := range r.Rules {
		who := slices.Contains(rl.Users, u.GetName()) || slices.ContainsFunc(u.GetGroups(), func(g string) bool { return slices.Contains(rl.Groups, g) })
		// The all-clusters view is open to anyone with a rule: it
		// shows each cluster's objects only to those its rules let read.
		where := cluster == "*" || slices.Contains(rl.Clusters, "*") || slices.Contains(rl.Clusters, cluster)
		if who && where {
			return authorizer.DecisionAllow, "", nil
		}
	}
	return authorizer.DecisionNoOpinion, fmt.Sprintf("no rule lets %q read cluster %q", u.GetName(), cluster), nil
}
