package kubelet

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// defaultFileMode is a volume file's mode when neither the item nor the
// volume gives one (0644).
const defaultFileMode = 0o644

// volumeFile is one file of a volume, by its path in the volume.
type volumeFile struct {
	path string
	data []byte
	mode os.FileMode
}

// prepareVolume makes volume v of pod, as the kubelet's volume plugins
// do, and returns its directory on the host: a new one in dir, or a
// claim's. Files are owned by group fsGroup when there is one. The
// kubelet would keep secrets, config maps and tokens up to date; this one
// writes them once.
func (n *Node) prepareVolume(ctx context.Context, pod *corev1.Pod, v corev1.Volume, dir string, fsGroup *int64) (string, error) {
	if v.PersistentVolumeClaim != nil {
		return n.claimDir(ctx, pod.Namespace, v.PersistentVolumeClaim.ClaimName, fsGroup)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	var files []volumeFile
	var err error
	switch {
	case v.EmptyDir != nil:
		// Anyone in the pod may write in an empty dir.
		return dir, os.Chmod(dir, 0o777)
	case v.Secret != nil:
		files, err = n.sourceFiles(ctx, pod, "Secret", v.Secret.SecretName, v.Secret.Items, v.Secret.Optional, v.Secret.DefaultMode)
	case v.ConfigMap != nil:
		files, err = n.sourceFiles(ctx, pod, "ConfigMap", v.ConfigMap.Name, v.ConfigMap.Items, v.ConfigMap.Optional, v.ConfigMap.DefaultMode)
	case v.DownwardAPI != nil:
		files, err = n.downwardFiles(pod, v.DownwardAPI.Items, v.DownwardAPI.DefaultMode)
	case v.Projected != nil:
		for _, src := range v.Projected.Sources {
			var more []volumeFile
			switch {
			case src.Secret != nil:
				more, err = n.sourceFiles(ctx, pod, "Secret", src.Secret.Name, src.Secret.Items, src.Secret.Optional, v.Projected.DefaultMode)
			case src.ConfigMap != nil:
				more, err = n.sourceFiles(ctx, pod, "ConfigMap", src.ConfigMap.Name, src.ConfigMap.Items, src.ConfigMap.Optional, v.Projected.DefaultMode)
			case src.DownwardAPI != nil:
				more, err = n.downwardFiles(pod, src.DownwardAPI.Items, v.Projected.DefaultMode)
			case src.ServiceAccountToken != nil:
				more, err = n.tokenFile(ctx, pod, src.ServiceAccountToken, v.Projected.DefaultMode)
			default:
				err = fmt.Errorf("a projected source this kubelet does not know")
			}
			if err != nil {
				break
			}
			files = append(files, more...)
		}
	default:
		return "", fmt.Errorf("volume %s: a volume type this kubelet does not mount (only emptyDir, secret, configMap, downwardAPI, projected and persistentVolumeClaim)", v.Name)
	}
	if err != nil {
		return "", fmt.Errorf("volume %s: %w", v.Name, err)
	}
	for _, f := range files {
		clean := filepath.Clean(f.path)
		if filepath.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, "../") {
			return "", fmt.Errorf("volume %s: path %q leaves the volume", v.Name, f.path)
		}
		p := filepath.Join(dir, clean)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(p, f.data, 0o600); err != nil {
			return "", err
		}
		if err := os.Chmod(p, f.mode); err != nil {
			return "", err
		}
		if fsGroup != nil && os.Geteuid() == 0 {
			if err := os.Chown(p, 0, int(*fsGroup)); err != nil {
				return "", err
			}
		}
	}
	return dir, nil
}

// claimDir is the directory of a PersistentVolumeClaim, on this node: the
// same for every pod that mounts the claim, so that what one pod wrote the
// next one finds, as on a volume. The claim must exist; nothing binds it
// here, so its phase is not checked. As the kubelet does for a volume
// with fsGroup, the directory is given to that group, setgid, writable by
// it.
func (n *Node) claimDir(ctx context.Context, namespace, name string, fsGroup *int64) (string, error) {
	if _, err := n.cs.CoreV1().PersistentVolumeClaims(namespace).Get(ctx, name, metav1.GetOptions{}); err != nil {
		return "", fmt.Errorf("PersistentVolumeClaim %s: %w", name, err)
	}
	dir := filepath.Join(n.claims, namespace, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	if fsGroup != nil && os.Geteuid() == 0 {
		if err := os.Chown(dir, 0, int(*fsGroup)); err != nil {
			return "", err
		}
		if err := os.Chmod(dir, 0o775|os.ModeSetgid); err != nil {
			return "", err
		}
	}
	return dir, nil
}

func fileMode(item *int32, volume *int32) os.FileMode {
	switch {
	case item != nil:
		return os.FileMode(*item)
	case volume != nil:
		return os.FileMode(*volume)
	}
	return defaultFileMode
}

// keyFiles turns a Secret's or ConfigMap's data into files: every key, or
// the items named.
func keyFiles(what string, data map[string][]byte, items []corev1.KeyToPath, optional bool, defaultMode *int32) ([]volumeFile, error) {
	if len(items) == 0 {
		keys := make([]string, 0, len(data))
		for k := range data {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		var files []volumeFile
		for _, k := range keys {
			files = append(files, volumeFile{path: k, data: data[k], mode: fileMode(nil, defaultMode)})
		}
		return files, nil
	}
	var files []volumeFile
	for _, it := range items {
		d, ok := data[it.Key]
		if !ok {
			if optional {
				continue
			}
			return nil, fmt.Errorf("%s has no key %q", what, it.Key)
		}
		files = append(files, volumeFile{path: it.Path, data: d, mode: fileMode(it.Mode, defaultMode)})
	}
	return files, nil
}

// keyData is the data of the Secret or ConfigMap (kind) name in the
// pod's namespace; found is false for an optional one that is not there.
func (n *Node) keyData(ctx context.Context, pod *corev1.Pod, kind, name string, optional *bool) (data map[string][]byte, found bool, err error) {
	data = map[string][]byte{}
	if kind == "Secret" {
		s, err := n.cs.CoreV1().Secrets(pod.Namespace).Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			return s.Data, true, nil
		}
		return missing(kind, name, optional, err)
	}
	cm, err := n.cs.CoreV1().ConfigMaps(pod.Namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return missing(kind, name, optional, err)
	}
	for k, v := range cm.Data {
		data[k] = []byte(v)
	}
	for k, v := range cm.BinaryData {
		data[k] = v
	}
	return data, true, nil
}

// missing is keyData's answer when the object could not be read.
func missing(kind, name string, optional *bool, err error) (map[string][]byte, bool, error) {
	if apierrors.IsNotFound(err) && optional != nil && *optional {
		return nil, false, nil
	}
	return nil, false, fmt.Errorf("%s %s: %w", kind, name, err)
}

// sourceFiles are the files of a Secret's or ConfigMap's keys.
func (n *Node) sourceFiles(ctx context.Context, pod *corev1.Pod, kind, name string, items []corev1.KeyToPath, optional *bool, defaultMode *int32) ([]volumeFile, error) {
	data, found, err := n.keyData(ctx, pod, kind, name, optional)
	if err != nil || !found {
		return nil, err
	}
	return keyFiles(kind+" "+name, data, items, optional != nil && *optional, defaultMode)
}

func (n *Node) downwardFiles(pod *corev1.Pod, items []corev1.DownwardAPIVolumeFile, defaultMode *int32) ([]volumeFile, error) {
	var files []volumeFile
	for _, it := range items {
		if it.FieldRef == nil {
			return nil, fmt.Errorf("downwardAPI %s: only fieldRef is resolved by this kubelet", it.Path)
		}
		v, err := n.fieldValue(pod, it.FieldRef.FieldPath)
		if err != nil {
			return nil, err
		}
		files = append(files, volumeFile{path: it.Path, data: []byte(v), mode: fileMode(it.Mode, defaultMode)})
	}
	return files, nil
}

// tokenFile asks for the pod's ServiceAccount token with a TokenRequest
// bound to the pod, as the kubelet does.
func (n *Node) tokenFile(ctx context.Context, pod *corev1.Pod, src *corev1.ServiceAccountTokenProjection, defaultMode *int32) ([]volumeFile, error) {
	expiration := int64(3600)
	if src.ExpirationSeconds != nil {
		expiration = *src.ExpirationSeconds
	}
	var audiences []string
	if src.Audience != "" {
		audiences = []string{src.Audience}
	}
	tr, err := n.cs.CoreV1().ServiceAccounts(pod.Namespace).CreateToken(ctx, pod.Spec.ServiceAccountName, &authnv1.TokenRequest{
		Spec: authnv1.TokenRequestSpec{
			Audiences:         audiences,
			ExpirationSeconds: &expiration,
			BoundObjectRef:    &authnv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("token of ServiceAccount %s: %w", pod.Spec.ServiceAccountName, err)
	}
	return []volumeFile{{path: src.Path, data: []byte(tr.Status.Token), mode: fileMode(nil, defaultMode)}}, nil
}
