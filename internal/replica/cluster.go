package replica

// AnnotationCluster is set, in the all-clusters view, on every object to
// the name of the cluster it is from (the bridge's BRIDGE_CLUSTER_NAME).
const AnnotationCluster = "kubebus.io/cluster"
