// Command demo shows the bridge at work against a throwaway local control
// plane: it starts kube-apiserver and etcd on loopback, runs the bridge
// with the stdout sink, creates, updates and deletes a few objects, and
// prints the stream. Then it stops the bridge, changes things while it is
// down, and starts it again to show that only what changed is published.
//
// Run it with `make demo`, which builds the binaries it needs.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubebus/bridge/test/controlplane"
	"github.com/kubebus/bridge/wire"
)

const ns = "demo"

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx := context.Background()
	say("starting kube-apiserver and etcd on loopback")
	cp, err := controlplane.Start(ctx, controlplane.Options{})
	if err != nil {
		return err
	}
	defer cp.Stop()
	kc, err := kubernetes.NewForConfig(cp.RESTConfig())
	if err != nil {
		return err
	}
	if _, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return err
	}

	bin := filepath.Join(os.Getenv("BRIDGE_TEST_BIN_DIR"), "bridge")
	env := []string{
		"KUBECONFIG=" + cp.KubeconfigPath(),
		"BRIDGE_RESOURCES=configmaps,deploy",
		"BRIDGE_NAMESPACES=" + ns,
		"BRIDGE_CLUSTER_NAME=demo",
		"BRIDGE_CHECKPOINT=file:" + filepath.Join(cp.Dir(), "bridge-checkpoint.db"),
		"BRIDGE_LOG_FORMAT=json",
		"BRIDGE_METRICS_ADDR=127.0.0.1:0",
	}

	say("starting the bridge: BRIDGE_RESOURCES=configmaps,deploy BRIDGE_NAMESPACES=demo BRIDGE_SINK=stdout")
	b, err := startBridge(bin, env)
	if err != nil {
		return err
	}
	cms := kc.CoreV1().ConfigMaps(ns)
	deps := kc.AppsV1().Deployments(ns)

	say("kubectl create configmap greeting --from-literal=hello=world")
	cm, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "greeting"}, Data: map[string]string{"hello": "world"}}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	b.await(1)
	say("kubectl create deployment web --image=nginx")
	if _, err := deps.Create(ctx, deployment("web"), metav1.CreateOptions{}); err != nil {
		return err
	}
	b.await(2)
	say("kubectl edit configmap greeting (hello=kubernetes)")
	cm.Data["hello"] = "kubernetes"
	if cm, err = cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		return err
	}
	b.await(3)
	say("kubectl create configmap settings; kubectl delete deployment web")
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings"}, Data: map[string]string{"mode": "fast"}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	if err := deps.Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		return err
	}
	b.await(5)
	first := b.first

	say("stopping the bridge (SIGTERM): it drains and flushes its checkpoint")
	if err := b.stop(); err != nil {
		return err
	}

	say("while it is down: edit greeting, delete settings, create farewell")
	cm.Data["hello"] = "again"
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		return err
	}
	if err := cms.Delete(ctx, "settings", metav1.DeleteOptions{}); err != nil {
		return err
	}
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "farewell"}}, metav1.CreateOptions{}); err != nil {
		return err
	}

	say("starting the bridge again: it publishes only what changed while it was down (snapshot=true)")
	if b, err = startBridge(bin, env); err != nil {
		return err
	}
	b.await(3)
	if err := b.stop(); err != nil {
		return err
	}
	say("done. The first event in full:")
	fmt.Println(first)
	return nil
}

type bridgeProc struct {
	cmd    *exec.Cmd
	events chan *wire.Message
	seen   int
	first  string
}

// startBridge runs the bridge and waits until it reports ready.
func startBridge(bin string, env []string) (*bridgeProc, error) {
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	logs, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s (run `make build`): %w", bin, err)
	}
	b := &bridgeProc{cmd: cmd, events: make(chan *wire.Message, 100)}
	ready := make(chan struct{})
	go b.read(out)
	go logLines(logs, ready)
	select {
	case <-ready:
		return b, nil
	case <-time.After(60 * time.Second):
		return nil, fmt.Errorf("bridge not ready after 60s")
	}
}

// logLines prints the bridge's log lines of note, and closes ready when it
// says it is ready.
func logLines(r io.Reader, ready chan struct{}) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		var rec map[string]any
		if json.Unmarshal(sc.Bytes(), &rec) != nil {
			fmt.Fprintln(os.Stderr, sc.Text())
			continue
		}
		msg, _ := rec["msg"].(string)
		switch {
		case strings.HasPrefix(msg, "ready"):
			fmt.Printf("  [bridge] %s\n", msg)
			close(ready)
		case msg == "loaded checkpoint":
			fmt.Printf("  [bridge] %s of %v: %v objects\n", msg, rec["resource"], rec["objects"])
		case msg == "stopped":
			fmt.Printf("  [bridge] stopped: published %v\n", rec["published"])
		case rec["level"] != "INFO":
			fmt.Fprintln(os.Stderr, sc.Text())
		}
	}
}

// read prints every event as one line and passes it on.
func (b *bridgeProc) read(r io.Reader) {
	defer close(b.events)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		m := &wire.Message{}
		if err := json.Unmarshal(sc.Bytes(), m); err != nil {
			fmt.Printf("  ? %s\n", sc.Text())
			continue
		}
		if b.first == "" {
			var pretty map[string]any
			_ = json.Unmarshal(sc.Bytes(), &pretty)
			out, _ := json.MarshalIndent(pretty, "", "  ")
			b.first = string(out)
		}
		fmt.Printf("  -> %-8s %-17s %-16s rv=%-5s snapshot=%-5v id=%s\n",
			m.Action, m.Resource.GroupResource(), m.Key(), m.ResourceVersion, m.Snapshot, m.ID[:12])
		b.events <- m
	}
}

// await waits until n events have arrived since the bridge started.
func (b *bridgeProc) await(n int) {
	timeout := time.After(30 * time.Second)
	for b.seen < n {
		select {
		case _, ok := <-b.events:
			if !ok {
				return
			}
			b.seen++
		case <-timeout:
			fmt.Fprintf(os.Stderr, "demo: still waiting for event %d\n", b.seen+1)
			return
		}
	}
}

func (b *bridgeProc) stop() error {
	if err := b.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	for range b.events {
	}
	return b.cmd.Wait()
}

func deployment(name string) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: name, Image: "nginx"}}},
			},
		},
	}
}

func say(s string) { fmt.Printf("\n== %s\n", s) }
