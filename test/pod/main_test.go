// Package pod runs the bridge the way the chart deploys it: helm installs
// the chart on a real kube-apiserver, and the Deployment's pod runs on
// this machine as the kubelet would run it (test/kubelet), from the
// bridge's image, with the pod's environment, volumes, ServiceAccount
// token, user and probes. What the tests establish:
//
//   - with NATS and a nats-kv checkpoint, and with Kafka over TLS with
//     SASL from an existing Secret, the pod turns ready by its readiness
//     probe and streams real changes: what the bus holds equals a LIST;
//   - while NATS is down the readiness probe fails naming the sink and
//     the liveness probe keeps passing (the kubelet would not restart
//     the bridge); once NATS is back the pod is ready again and the
//     changes made meanwhile are on the bus;
//   - two replicas from the chart's values elect a leader; when the
//     leader is killed the standby takes over, and the stream equals a
//     LIST with no event stored twice;
//   - the replica, rendered with replica.enabled (ci/replica set) and run
//     from the same image with /replica as its command beside the
//     release's bridge, with the Secrets the chart generates and the
//     tokens Secret it names, turns ready on /readyz and serves
//     /clusters/<name>/api over its generated TLS to a token only, and
//     the resources the bridge published under /clusters/<name>/api/v1.
//
// The pods share the host's network, so each pod gets a metrics port of
// its own through the chart's metrics.port value.
package pod

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/kubebus/bridge/test/controlplane"
)

// cp is the package's control plane. Its API server runs the
// ServiceAccount admission plugin, which gives each pod the volume of its
// ServiceAccount's token, as a cluster's does.
var cp *controlplane.ControlPlane

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var err error
	cp, err = controlplane.Start(ctx, controlplane.Options{
		ServiceAccountAdmission: true,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "pod: start control plane (run `make controlplane` first):", err)
		return 1
	}
	defer cp.Stop()
	return m.Run()
}
