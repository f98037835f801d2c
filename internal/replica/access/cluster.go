package access

import "context"

// AllClusters is the cluster of a request on the all-clusters view
// (/clusters/*). Such a request is allowed when its identity may make it
// on at least one cluster; the server then narrows the answer to the
// clusters that [Rules.Scope] names.
const AllClusters = "*"

type clusterKey struct{}

// WithCluster returns a copy of ctx that carries the cluster a request is
// addressed to: a cluster's name, or [AllClusters].
func WithCluster(ctx context.Context, cluster string) context.Context {
	return context.WithValue(ctx, clusterKey{}, cluster)
}

// ClusterFrom returns the cluster that [WithCluster] put in ctx, and
// whether there was one.
func ClusterFrom(ctx context.Context) (string, bool) {
	c, ok := ctx.Value(clusterKey{}).(string)
	return c, ok
}
