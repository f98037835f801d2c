package kubelet

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// envList is an environment in order, where a later value of a name
// replaces the earlier one in its place, as the container runtime merges
// the container's variables over the image's.
type envList struct {
	names  []string
	values map[string]string
}

func newEnvList() *envList { return &envList{values: map[string]string{}} }

func (e *envList) set(name, value string) {
	if _, ok := e.values[name]; !ok {
		e.names = append(e.names, name)
	}
	e.values[name] = value
}

func (e *envList) lookup(name string) (string, bool) {
	v, ok := e.values[name]
	return v, ok
}

func (e *envList) environ() []string {
	out := make([]string, 0, len(e.names))
	for _, n := range e.names {
		out = append(out, n+"="+e.values[n])
	}
	return out
}

// containerEnv is the environment of c in pod, as the kubelet makes it:
// the image's variables, the kubernetes Service's, HOSTNAME, then envFrom
// and env in order, with $(NAME) references expanded and valueFrom
// resolved from the API server and the pod.
func (n *Node) containerEnv(ctx context.Context, pod *corev1.Pod, c *corev1.Container) ([]string, error) {
	env := newEnvList()
	for _, kv := range n.image.config.Env {
		name, value, _ := strings.Cut(kv, "=")
		env.set(name, value)
	}
	env.set("HOSTNAME", pod.Name)
	// The kubelet gives every container the kubernetes Service of the
	// default namespace, also without service links; the container's env
	// may refer to them, and to its own earlier variables, with $(NAME).
	defined := newEnvList()
	port := strconv.Itoa(n.apiPort)
	for _, kv := range [][2]string{
		{"KUBERNETES_SERVICE_HOST", n.apiHost},
		{"KUBERNETES_SERVICE_PORT", port},
		{"KUBERNETES_SERVICE_PORT_HTTPS", port},
		{"KUBERNETES_PORT", "tcp://" + n.apiHost + ":" + port},
		{"KUBERNETES_PORT_" + port + "_TCP", "tcp://" + n.apiHost + ":" + port},
		{"KUBERNETES_PORT_" + port + "_TCP_PROTO", "tcp"},
		{"KUBERNETES_PORT_" + port + "_TCP_PORT", port},
		{"KUBERNETES_PORT_" + port + "_TCP_ADDR", n.apiHost},
	} {
		env.set(kv[0], kv[1])
		defined.set(kv[0], kv[1])
	}
	for _, from := range c.EnvFrom {
		var data map[string][]byte
		var found bool
		var err error
		switch {
		case from.ConfigMapRef != nil:
			data, found, err = n.keyData(ctx, pod, "ConfigMap", from.ConfigMapRef.Name, from.ConfigMapRef.Optional)
		case from.SecretRef != nil:
			data, found, err = n.keyData(ctx, pod, "Secret", from.SecretRef.Name, from.SecretRef.Optional)
		default:
			return nil, fmt.Errorf("envFrom: a source this kubelet does not know")
		}
		if err != nil {
			return nil, fmt.Errorf("envFrom: %w", err)
		}
		if !found {
			continue
		}
		keys := make([]string, 0, len(data))
		for k := range data {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			env.set(from.Prefix+k, string(data[k]))
			defined.set(from.Prefix+k, string(data[k]))
		}
	}
	for _, v := range c.Env {
		value := v.Value
		if v.ValueFrom != nil {
			resolved, ok, err := n.valueFrom(ctx, pod, v.ValueFrom)
			if err != nil {
				return nil, fmt.Errorf("env %s: %w", v.Name, err)
			}
			if !ok {
				continue
			}
			value = resolved
		} else {
			value = expand(value, defined)
		}
		env.set(v.Name, value)
		defined.set(v.Name, value)
	}
	return env.environ(), nil
}

// valueFrom resolves one env source. It reports false for an optional
// key that is not there.
func (n *Node) valueFrom(ctx context.Context, pod *corev1.Pod, src *corev1.EnvVarSource) (string, bool, error) {
	switch {
	case src.FieldRef != nil:
		v, err := n.fieldValue(pod, src.FieldRef.FieldPath)
		return v, err == nil, err
	case src.SecretKeyRef != nil:
		return n.keyValue(ctx, pod, "Secret", src.SecretKeyRef.Name, src.SecretKeyRef.Key, src.SecretKeyRef.Optional)
	case src.ConfigMapKeyRef != nil:
		return n.keyValue(ctx, pod, "ConfigMap", src.ConfigMapKeyRef.Name, src.ConfigMapKeyRef.Key, src.ConfigMapKeyRef.Optional)
	case src.ResourceFieldRef != nil:
		v, err := resourceValue(pod, src.ResourceFieldRef)
		return v, err == nil, err
	default:
		return "", false, fmt.Errorf("a valueFrom this kubelet does not resolve (fileKeyRef)")
	}
}

// keyValue is one key of a Secret or ConfigMap. It reports false for an
// optional key or object that is not there.
func (n *Node) keyValue(ctx context.Context, pod *corev1.Pod, kind, name, key string, optional *bool) (string, bool, error) {
	data, found, err := n.keyData(ctx, pod, kind, name, optional)
	if err != nil || !found {
		return "", false, err
	}
	v, ok := data[key]
	if !ok {
		if optional != nil && *optional {
			return "", false, nil
		}
		return "", false, fmt.Errorf("%s %s has no key %q", kind, name, key)
	}
	return string(v), true, nil
}

// resourceValue is the Downward API's value of a container's resource
// limit or request, in units of the divisor, rounded up.
func resourceValue(pod *corev1.Pod, ref *corev1.ResourceFieldSelector) (string, error) {
	var c *corev1.Container
	for i := range pod.Spec.Containers {
		if ref.ContainerName == "" || pod.Spec.Containers[i].Name == ref.ContainerName {
			c = &pod.Spec.Containers[i]
			break
		}
	}
	if c == nil {
		return "", fmt.Errorf("resourceFieldRef: no container %q", ref.ContainerName)
	}
	kind, name, _ := strings.Cut(ref.Resource, ".")
	var list corev1.ResourceList
	switch kind {
	case "limits":
		list = c.Resources.Limits
	case "requests":
		list = c.Resources.Requests
	default:
		return "", fmt.Errorf("resourceFieldRef %q: not a limit or a request", ref.Resource)
	}
	q, ok := list[corev1.ResourceName(name)]
	if !ok {
		// The kubelet would give the node's allocatable amount.
		return "", fmt.Errorf("resourceFieldRef %q: the container sets none, and this kubelet has no node allocatable to give", ref.Resource)
	}
	divisor := ref.Divisor
	if divisor.IsZero() {
		divisor = resource.MustParse("1")
	}
	if name == string(corev1.ResourceCPU) {
		return strconv.FormatInt((q.MilliValue()+divisor.MilliValue()-1)/divisor.MilliValue(), 10), nil
	}
	return strconv.FormatInt((q.Value()+divisor.Value()-1)/divisor.Value(), 10), nil
}

// fieldValue is the Downward API's value of a pod field.
func (n *Node) fieldValue(pod *corev1.Pod, path string) (string, error) {
	if key, ok := strings.CutPrefix(path, "metadata.labels['"); ok {
		return pod.Labels[strings.TrimSuffix(key, "']")], nil
	}
	if key, ok := strings.CutPrefix(path, "metadata.annotations['"); ok {
		return pod.Annotations[strings.TrimSuffix(key, "']")], nil
	}
	switch path {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "spec.nodeName":
		return nodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.podIP", "status.podIPs", "status.hostIP", "status.hostIPs":
		// The pods share the host's network.
		return n.apiHost, nil
	}
	return "", fmt.Errorf("fieldRef %q: a field this kubelet does not resolve", path)
}

// expand replaces $(NAME) with NAME's value where it is defined and
// $$ with $, leaving any other text as it is: the kubelet's expansion of
// env values, command and args.
func expand(s string, env *envList) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			name := s[i+2 : i+2+end]
			if v, ok := env.lookup(name); ok {
				b.WriteString(v)
			} else {
				b.WriteString(s[i : i+3+end])
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}
