package replica

import "context"

// AllClusters is the cluster name of the all-clusters view,
// /clusters/*/...: lists and watches merge every cluster's objects.
const AllClusters = "*"

// AnnotationCluster is set, in the all-clusters view, on every object to
// the name of the cluster it is from (the bridge's BRIDGE_CLUSTER_NAME).
const AnnotationCluster = "kubebus.io/cluster"

type clusterKey struct{}

// WithCluster returns ctx naming the cluster a request reads ("*" for all).
// It is the one place to swap for the access package's WithCluster.
func WithCluster(ctx context.Context, name string) context.Context {
	return context.WithValue(ctx, clusterKey{}, name)
}

// ClusterFrom returns the cluster WithCluster put in ctx.
func ClusterFrom(ctx context.Context) (string, bool) {
	name, ok := ctx.Value(clusterKey{}).(string)
	return name, ok
}
