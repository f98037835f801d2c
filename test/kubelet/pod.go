package kubelet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubebus/bridge/test/controlplane"
	"github.com/kubebus/bridge/test/logtest"
)

// Pod is a pod the node runs: its one container's process and its
// probes.
type Pod struct {
	// Object is the pod as the API server stored it: with the volumes and
	// defaults its admission added, and its uid.
	Object    *corev1.Pod
	container corev1.Container
	// Env is the container's environment, resolved.
	Env []string
	// Argv and Dir are the container's command line and working directory.
	Argv []string
	Dir  string

	cmd    *exec.Cmd
	pid    int
	log    *logtest.Buffer // standard output and error
	stdout *logtest.Buffer
	exited chan struct{}
	err    error // the process's end; read after exited is closed
	grace  time.Duration

	asPodUser bool

	readiness, liveness *prober
	stopProbes          context.CancelFunc
}

// Run creates pod in the API server and starts its container as the
// kubelet and a container runtime would: the image unpacked as the
// container's root filesystem, read-only when the security context says
// so; the volumes the pod mounts, with the Secrets, ConfigMaps, Downward
// API fields and the ServiceAccount token (a TokenRequest bound to the
// pod) they hold; the environment with valueFrom resolved; the command,
// args, working directory, user, groups and no_new_privs the pod and the
// image say. Its probes start with the container. The pod is stopped,
// if still running, when t ends.
//
// Run supports one container and no init containers, and refuses what it
// does not know (a volume type, a probe type, a field) rather than run
// something else.
func (n *Node) Run(t testing.TB, pod *corev1.Pod) *Pod {
	t.Helper()
	p, err := n.run(t, pod)
	if err != nil {
		t.Fatalf("kubelet: pod %s/%s: %v", pod.Namespace, pod.Name, err)
	}
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			t.Logf("pod %s logs:\n%s", p.Object.Name, p.Logs())
		}
		n.deletePod(pod.Namespace, pod.Name)
	})
	return p
}

func (n *Node) run(t testing.TB, pod *corev1.Pod) (*Pod, error) {
	ctx := t.Context()
	if len(pod.Spec.Containers) != 1 || len(pod.Spec.InitContainers) > 0 {
		return nil, fmt.Errorf("%d containers and %d init containers: this kubelet runs pods of one container", len(pod.Spec.Containers), len(pod.Spec.InitContainers))
	}
	if err := n.publishRootCA(ctx, pod.Namespace); err != nil {
		return nil, err
	}
	pod = pod.DeepCopy()
	pod.Spec.NodeName = nodeName
	created, err := n.cs.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		return nil, err
	}
	pod = created
	ok := false
	defer func() {
		if !ok {
			n.deletePod(pod.Namespace, pod.Name)
		}
	}()
	c := pod.Spec.Containers[0]
	if automount(pod) && mountAt(c, serviceAccountDir) == nil {
		return nil, fmt.Errorf("the API server added no ServiceAccount token volume at %s: it must run the ServiceAccount admission plugin", serviceAccountDir)
	}

	p := &Pod{Object: pod, container: c, log: &logtest.Buffer{}, stdout: &logtest.Buffer{}, exited: make(chan struct{})}
	p.grace = 30 * time.Second
	if g := pod.Spec.TerminationGracePeriodSeconds; g != nil {
		p.grace = time.Duration(*g) * time.Second
	}

	dir := filepath.Join(t.TempDir(), pod.Name)
	root := filepath.Join(dir, "rootfs")
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, err
	}
	if err := n.image.unpack(root); err != nil {
		return nil, err
	}
	spec := shimSpec{Root: root}
	uid, gid, err := n.user(pod, &c)
	if err != nil {
		return nil, err
	}
	sc := c.SecurityContext
	psc := pod.Spec.SecurityContext
	var fsGroup *int64
	if psc != nil {
		fsGroup = psc.FSGroup
	}
	spec.SetUser = os.Geteuid() == 0
	p.asPodUser = spec.SetUser
	spec.UID, spec.GID = uid, gid
	if fsGroup != nil {
		spec.Groups = append(spec.Groups, int(*fsGroup))
	}
	if psc != nil {
		for _, g := range psc.SupplementalGroups {
			spec.Groups = append(spec.Groups, int(g))
		}
	}
	spec.ReadOnlyRoot = sc != nil && sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem
	spec.NoNewPrivs = sc != nil && sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation

	// Volumes, then the mounts in the container's order; /proc, and the
	// /etc/hosts the kubelet writes for every pod.
	volumes := map[string]string{}
	for _, v := range pod.Spec.Volumes {
		if mountsVolume(c, v.Name) {
			vdir, err := n.prepareVolume(ctx, pod, v, filepath.Join(dir, "volumes", v.Name), fsGroup)
			if err != nil {
				return nil, err
			}
			volumes[v.Name] = vdir
		}
	}
	spec.Mounts = append(spec.Mounts, shimMount{Target: "/proc", Proc: true})
	hosts := filepath.Join(dir, "etc-hosts")
	hostsText := "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n" + n.apiHost + "\t" + pod.Name + "\n"
	if err := os.WriteFile(hosts, []byte(hostsText), 0o644); err != nil {
		return nil, err
	}
	spec.Mounts = append(spec.Mounts, shimMount{Source: hosts, Target: "/etc/hosts"})
	for _, m := range c.VolumeMounts {
		src, ok := volumes[m.Name]
		if !ok {
			return nil, fmt.Errorf("volumeMount %s: no volume of that name", m.Name)
		}
		if m.SubPath != "" || m.SubPathExpr != "" {
			// A subPath is resolved in a volume the container may
			// write, where a link could lead out of it.
			return nil, fmt.Errorf("volumeMount %s: subPath is not supported by this kubelet", m.Name)
		}
		spec.Mounts = append(spec.Mounts, shimMount{Source: src, Target: m.MountPath, ReadOnly: m.ReadOnly})
	}

	if pod.Spec.EnableServiceLinks == nil || *pod.Spec.EnableServiceLinks {
		return nil, errors.New("enableServiceLinks is not false: this kubelet does not add service links")
	}
	if p.Env, err = n.containerEnv(ctx, pod, &c); err != nil {
		return nil, err
	}
	if !slices.ContainsFunc(p.Env, func(kv string) bool { return strings.HasPrefix(kv, "HOME=") }) {
		// The runtime sets HOME to the user's home in the image.
		p.Env = append(p.Env, "HOME="+homeOf(root, uid))
	}
	spec.Env = p.Env
	p.Argv, p.Dir = n.commandLine(&c, p.Env)
	if len(p.Argv) == 0 {
		return nil, errors.New("neither the container nor the image names a command")
	}
	spec.Argv, spec.Dir = p.Argv, p.Dir

	// The probes, against the container's ports on the host's network.
	if c.ReadinessProbe != nil {
		if p.readiness, err = newProber("readiness", c.ReadinessProbe, &c, n.apiHost); err != nil {
			return nil, err
		}
	}
	if c.LivenessProbe != nil {
		if p.liveness, err = newProber("liveness", c.LivenessProbe, &c, n.apiHost); err != nil {
			return nil, err
		}
	}
	if c.StartupProbe != nil {
		return nil, errors.New("startup probes are not run by this kubelet")
	}

	specFile := filepath.Join(dir, "container.json")
	data, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(specFile, data, 0o600); err != nil {
		return nil, err
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self)
	cmd.Env = []string{shimEnv + "=" + specFile}
	cmd.Stdout, cmd.Stderr = io.MultiWriter(p.stdout, p.log), p.log
	cmd.WaitDelay = 2 * time.Second
	cmd.SysProcAttr = namespaces()
	if err := controlplane.StartTied(cmd, p.exited); err != nil {
		return nil, fmt.Errorf("starting the container: %w", err)
	}
	p.cmd, p.pid = cmd, cmd.Process.Pid
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	probeCtx, cancel := context.WithCancel(context.Background())
	p.stopProbes = cancel
	for _, pr := range []*prober{p.readiness, p.liveness} {
		if pr != nil {
			go pr.run(probeCtx)
		}
	}
	ok = true
	return p, nil
}

// deletePod deletes the pod from the API server at once, as the kubelet
// does once its containers ended; its token is then no longer accepted.
func (n *Node) deletePod(namespace, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = n.cs.CoreV1().Pods(namespace).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: new(int64(0))})
}

// homeOf is uid's home directory in the image's /etc/passwd, or "/".
func homeOf(root string, uid int) string {
	data, err := os.ReadFile(filepath.Join(root, "etc", "passwd"))
	if err != nil {
		return "/"
	}
	for line := range strings.Lines(string(data)) {
		f := strings.Split(strings.TrimSpace(line), ":")
		if len(f) >= 6 && f[2] == strconv.Itoa(uid) && f[5] != "" {
			return f[5]
		}
	}
	return "/"
}

// namespaces puts the shim in a mount namespace of its own: as root, a
// new one; otherwise in a new user namespace as well, where the test's
// user is root, and the container then keeps that user (it cannot become
// another one).
func namespaces() *syscall.SysProcAttr {
	if os.Geteuid() == 0 {
		return &syscall.SysProcAttr{Setpgid: true, Unshareflags: syscall.CLONE_NEWNS}
	}
	return &syscall.SysProcAttr{
		Setpgid:                    true,
		Cloneflags:                 syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS,
		UidMappings:                []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
		GidMappings:                []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}},
		GidMappingsEnableSetgroups: false,
	}
}

// user is the container's uid and gid: the security context's, else the
// image's. runAsNonRoot refuses uid 0, as the kubelet does.
func (n *Node) user(pod *corev1.Pod, c *corev1.Container) (uid, gid int, err error) {
	userText, groupText, _ := strings.Cut(n.image.config.User, ":")
	if userText != "" {
		if uid, err = strconv.Atoi(userText); err != nil {
			return 0, 0, fmt.Errorf("the image's user %q is not a number", n.image.config.User)
		}
	}
	if groupText != "" {
		if gid, err = strconv.Atoi(groupText); err != nil {
			return 0, 0, fmt.Errorf("the image's group %q is not a number", n.image.config.User)
		}
	}
	nonRoot := false
	if psc := pod.Spec.SecurityContext; psc != nil {
		if psc.RunAsUser != nil {
			uid = int(*psc.RunAsUser)
		}
		if psc.RunAsGroup != nil {
			gid = int(*psc.RunAsGroup)
		}
		if psc.RunAsNonRoot != nil {
			nonRoot = *psc.RunAsNonRoot
		}
	}
	if sc := c.SecurityContext; sc != nil {
		if sc.RunAsUser != nil {
			uid = int(*sc.RunAsUser)
		}
		if sc.RunAsGroup != nil {
			gid = int(*sc.RunAsGroup)
		}
		if sc.RunAsNonRoot != nil {
			nonRoot = *sc.RunAsNonRoot
		}
	}
	if nonRoot && uid == 0 {
		return 0, 0, errors.New("container has runAsNonRoot and image will run as root")
	}
	return uid, gid, nil
}

// commandLine is the container's command and args over the image's
// entrypoint and cmd, with $(NAME) expanded, and its working directory.
func (n *Node) commandLine(c *corev1.Container, environ []string) ([]string, string) {
	env := newEnvList()
	for _, kv := range environ {
		name, value, _ := strings.Cut(kv, "=")
		env.set(name, value)
	}
	command, args := n.image.config.Entrypoint, n.image.config.Cmd
	if len(c.Command) > 0 {
		command, args = c.Command, nil
	}
	if len(c.Args) > 0 {
		args = c.Args
	}
	var argv []string
	for _, a := range append(append([]string(nil), command...), args...) {
		argv = append(argv, expand(a, env))
	}
	dir := c.WorkingDir
	if dir == "" {
		dir = n.image.config.WorkingDir
	}
	if dir == "" {
		dir = "/"
	}
	return argv, dir
}

func automount(pod *corev1.Pod) bool {
	return pod.Spec.AutomountServiceAccountToken == nil || *pod.Spec.AutomountServiceAccountToken
}

func mountAt(c corev1.Container, path string) *corev1.VolumeMount {
	for i := range c.VolumeMounts {
		if c.VolumeMounts[i].MountPath == path {
			return &c.VolumeMounts[i]
		}
	}
	return nil
}

func mountsVolume(c corev1.Container, name string) bool {
	for _, m := range c.VolumeMounts {
		if m.Name == name {
			return true
		}
	}
	return false
}

// AsPodUser reports whether the container runs as the pod's user and
// groups, as it does when the tests run as root (see the package doc).
func (p *Pod) AsPodUser() bool { return p.asPodUser }

// PID is the container's process id, on the host.
func (p *Pod) PID() int { return p.pid }

// Name is the pod's name.
func (p *Pod) Name() string { return p.Object.Name }

// Logs is what the container wrote to its standard output and error.
func (p *Pod) Logs() string { return p.log.String() }

// Stdout is what the container wrote to its standard output.
func (p *Pod) Stdout() string { return p.stdout.String() }

// Ready reports whether the container runs and its readiness probe
// passes, by its thresholds.
func (p *Pod) Ready() bool {
	if done, _ := p.Exited(); done {
		return false
	}
	return p.readiness != nil && p.readiness.passing()
}

// Readiness is the readiness probe's latest answer.
func (p *Pod) Readiness() (ProbeResult, bool) {
	if p.readiness == nil {
		return ProbeResult{}, false
	}
	return p.readiness.last()
}

// ReadinessHistory is every readiness answer so far, oldest first.
func (p *Pod) ReadinessHistory() []ProbeResult {
	if p.readiness == nil {
		return nil
	}
	return p.readiness.history()
}

// LivenessFailures are the times the liveness probe reached its failure
// threshold: each is a restart the kubelet would have made.
func (p *Pod) LivenessFailures() []time.Time {
	if p.liveness == nil {
		return nil
	}
	return p.liveness.failures()
}

// Liveness is the liveness probe's latest answer.
func (p *Pod) Liveness() (ProbeResult, bool) {
	if p.liveness == nil {
		return ProbeResult{}, false
	}
	return p.liveness.last()
}

// Exited reports whether the container's process has ended, and how.
func (p *Pod) Exited() (bool, error) {
	select {
	case <-p.exited:
		return true, p.err
	default:
		return false, nil
	}
}

// Stop stops the container as the kubelet does when the pod is deleted:
// SIGTERM, then SIGKILL once terminationGracePeriodSeconds have passed.
// It returns how the process ended and how long it took.
func (p *Pod) Stop() (time.Duration, error) {
	start := time.Now()
	p.stopProbes()
	if done, err := p.Exited(); done {
		return 0, err
	}
	_ = syscall.Kill(p.pid, syscall.SIGTERM)
	timer := time.NewTimer(p.grace)
	defer timer.Stop()
	select {
	case <-p.exited:
	case <-timer.C:
		_ = syscall.Kill(-p.pid, syscall.SIGKILL)
		<-p.exited
	}
	return time.Since(start), p.err
}

// Kill ends the container at once, as a node that fails would.
func (p *Pod) Kill() {
	p.stopProbes()
	if done, _ := p.Exited(); done {
		return
	}
	_ = syscall.Kill(-p.pid, syscall.SIGKILL)
	<-p.exited
}
