// Package kubelet runs a pod's container on this machine the way the
// kubelet and a container runtime would, so that tests can run the
// bridge exactly as a chart's Deployment deploys it, without a cluster's
// nodes or Docker.
//
// A Node belongs to one kube-apiserver, which must run the
// ServiceAccount admission plugin. Node.Run creates the pod in the API
// server, so that admission adds what a cluster adds (the ServiceAccount
// token volume, defaults), and starts its container from an Image:
//
//   - the image's layers unpacked as the container's root filesystem,
//     mounted read-only when readOnlyRootFilesystem says so, entered with
//     chroot in a mount namespace of the container's own;
//   - its volumes: emptyDir, secret, configMap, downwardAPI, projected
//     (with the ServiceAccount token asked for with a TokenRequest bound
//     to the pod, and the namespace's kube-root-ca.crt ConfigMap, which
//     the Node publishes as kube-controller-manager does), and a
//     persistentVolumeClaim as a directory of the node that outlives the
//     pod; files owned by group fsGroup; /proc and an /etc/hosts;
//   - the environment: the image's, HOSTNAME, the kubernetes Service's
//     KUBERNETES_SERVICE_HOST and _PORT (the API server's address),
//     envFrom, then env in order with $(NAME) expanded and valueFrom
//     resolved from Secrets, ConfigMaps and the Downward API (fields, and
//     the container's own limits and requests);
//   - the command and args over the image's entrypoint and cmd, the
//     working directory, the user and group (runAsNonRoot refuses uid 0),
//     fsGroup and supplemental groups, and no_new_privs when
//     allowPrivilegeEscalation is false;
//   - its readiness and liveness probes (httpGet, tcpSocket), run with the
//     probe's period, timeout and thresholds.
//
// So client-go's in-cluster configuration reads the token and CA at
// /var/run/secrets/kubernetes.io/serviceaccount, as in a pod.
//
// What differs from a cluster: pods share the host's network (two pods
// cannot listen on one port; pod and host IP are the API server's
// address, 127.0.0.1); a container that ends is not restarted (a liveness
// failure is recorded instead, see Pod.LivenessFailures); Secrets and
// tokens are written once, not refreshed; resource limits, seccomp and
// capabilities beyond what a non-root user lacks are not applied; a
// claim is never bound to a volume. What the Node does not know (another
// volume type, a startup or exec probe, a node's allocatable) fails the
// test rather than run something else.
//
// Run as root, the container runs as the pod's user. Run as another user,
// the container's process runs in a user namespace as that user, mapped
// to root there, and cannot take the pod's user (Pod.AsPodUser reports
// which); files are then not given to fsGroup either.
package kubelet
