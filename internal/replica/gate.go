package replica

import (
	"fmt"
	"net/http"
	"slices"

	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/endpoints/filters"
	"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters"
	"k8s.io/apiserver/pkg/endpoints/request"

	"github.com/kubebus/bridge/internal/replica/access"
)

// gate answers, once a request is authenticated and before it is
// authorized, what no rule could change:
//   - A write (a resource verb other than get, list and watch, or a
//     method other than GET on a non-resource path) is 405 for every
//     authenticated identity: the replica is read-only, whatever the
//     rules. The message names the cluster's API server only to an
//     identity with a grant on that cluster, so that a 405 tells nobody
//     else which clusters are on the bus.
//   - A cluster with no discovery document on the bus is 404 for an
//     identity whose grants cover that cluster's name (it would read the
//     cluster if it were there), and 403 for any other: the 403 it gets
//     for a cluster that is on the bus, so that nobody learns which
//     clusters exist beyond their grants.
//
// Every other request goes on to h with its cluster, one on the bus or
// access.AllClusters, in its context (access.WithCluster).
func (s *Server) gate(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		name, _ := access.ClusterFrom(ctx)
		info, ok := request.RequestInfoFrom(ctx)
		u, uok := request.UserFrom(ctx)
		if !ok || !uok {
			writeStatus(w, r, fmt.Errorf("replica: no request info or user"), "")
			return
		}
		known := name == access.AllClusters
		if !known {
			_, known = s.disc.cluster(name)
		}
		if isWrite(info) {
			s.readOnly(w, r, name, info, known && s.grantedOn(u, name))
			return
		}
		if !known {
			if s.grantedOn(u, name) {
				writeStatus(w, r, notOnBus(name), "")
				return
			}
			attrs, err := filters.GetAuthorizerAttributes(ctx)
			if err != nil {
				writeStatus(w, r, err, "")
				return
			}
			s.Denied(name, attrs.GetResource())
			responsewriters.Forbidden(attrs, w, r, fmt.Sprintf("access: no rule allows it on cluster %q", name), serializers)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// isWrite reports whether the request would change something.
func isWrite(info *request.RequestInfo) bool {
	if info.IsResourceRequest {
		return !slices.Contains(readVerbs, info.Verb)
	}
	return info.Verb != "get"
}

// grantedOn reports whether u has a grant on cluster: whether the rules
// in use let u read cluster's discovery, which every grant on a cluster
// does.
func (s *Server) grantedOn(u user.Info, cluster string) bool {
	discovery := authorizer.AttributesRecord{User: u, Verb: "get", Path: "/api"}
	return s.cfg.Rules.Current().Scope(discovery).Has(cluster)
}
