package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Shape of the ConfigMaps the memory and restart benchmarks watch: six
// values of 200 characters make, with metadata and the managedFields the
// API server adds, about 2 KiB of JSON per object.
const (
	configMapKeys     = 6
	configMapValueLen = 200
	fieldManager      = "bench"
)

// objectRef names one ConfigMap.
type objectRef struct{ Namespace, Name string }

// unlimitedClient is a clientset without client-side rate limiting, for
// writing tens of thousands of objects quickly.
func unlimitedClient(rc *rest.Config) (kubernetes.Interface, error) {
	rc = rest.CopyConfig(rc)
	rc.QPS = -1
	return kubernetes.NewForConfig(rc)
}

// createConfigMaps creates n ConfigMaps spread evenly over namespaces (which
// it creates too), with writers requests in flight. Object i goes to
// namespace i mod len(namespaces), so any run of consecutive refs spans
// every namespace.
func createConfigMaps(ctx context.Context, kc kubernetes.Interface, namespaces []string, n, writers int) ([]objectRef, error) {
	if err := createNamespaces(ctx, kc, namespaces); err != nil {
		return nil, err
	}
	refs := make([]objectRef, n)
	for i := range refs {
		refs[i] = objectRef{namespaces[i%len(namespaces)], fmt.Sprintf("cm-%06d", i)}
	}
	err := parallel(ctx, n, writers, func(i int) error {
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{
				Name:        refs[i].Name,
				Labels:      map[string]string{"app.kubernetes.io/name": "bench", "bench/shard": fmt.Sprint(i % 16)},
				Annotations: map[string]string{"bench/created-by": "memory and restart benchmark"},
			},
			Data: configMapData(uint64(i), 0),
		}
		_, err := kc.CoreV1().ConfigMaps(refs[i].Namespace).Create(ctx, cm, metav1.CreateOptions{FieldManager: fieldManager})
		if err != nil {
			return fmt.Errorf("create %s/%s: %w", refs[i].Namespace, refs[i].Name, err)
		}
		return nil
	})
	return refs, err
}

// createNamespaces creates namespaces; one that exists already is left
// as it is.
func createNamespaces(ctx context.Context, kc kubernetes.Interface, namespaces []string) error {
	for _, ns := range namespaces {
		_, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create namespace %s: %w", ns, err)
		}
	}
	return nil
}

// configMapData is the data of ConfigMap i in its generation gen: values
// of random letters, different for every object and generation.
func configMapData(i, gen uint64) map[string]string {
	r := rand.New(rand.NewPCG(i, gen))
	const letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	data := make(map[string]string, configMapKeys)
	buf := make([]byte, configMapValueLen)
	for k := range configMapKeys {
		for j := range buf {
			buf[j] = letters[r.IntN(len(letters))]
		}
		data[fmt.Sprintf("setting-%d.conf", k)] = string(buf)
	}
	return data
}

// changeConfigMaps replaces one value of each of update, as generation gen,
// and deletes each of del, with writers requests in flight.
func changeConfigMaps(ctx context.Context, kc kubernetes.Interface, update, del []objectRef, gen uint64, writers int) error {
	return parallel(ctx, len(update)+len(del), writers, func(i int) error {
		if i >= len(update) {
			ref := del[i-len(update)]
			if err := kc.CoreV1().ConfigMaps(ref.Namespace).Delete(ctx, ref.Name, metav1.DeleteOptions{}); err != nil {
				return fmt.Errorf("delete %s/%s: %w", ref.Namespace, ref.Name, err)
			}
			return nil
		}
		ref := update[i]
		patch, err := json.Marshal(map[string]any{"data": map[string]string{
			"setting-0.conf": configMapData(uint64(i), gen)["setting-0.conf"],
		}})
		if err != nil {
			return err
		}
		_, err = kc.CoreV1().ConfigMaps(ref.Namespace).Patch(ctx, ref.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: fieldManager})
		if err != nil {
			return fmt.Errorf("update %s/%s: %w", ref.Namespace, ref.Name, err)
		}
		return nil
	})
}

// meanObjectSize is the mean size of refs as JSON, as the API server
// returns them (managedFields included).
func meanObjectSize(ctx context.Context, kc kubernetes.Interface, refs []objectRef) (float64, error) {
	var total int
	for _, ref := range refs {
		cm, err := kc.CoreV1().ConfigMaps(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil {
			return 0, err
		}
		if len(cm.ManagedFields) == 0 {
			return 0, fmt.Errorf("%s/%s has no managedFields", ref.Namespace, ref.Name)
		}
		cm.APIVersion, cm.Kind = "v1", "ConfigMap"
		b, err := json.Marshal(cm)
		if err != nil {
			return 0, err
		}
		total += len(b)
	}
	return float64(total) / float64(len(refs)), nil
}

// parallel calls fn(0) to fn(n-1) from workers goroutines and returns the
// first error; after an error, or when ctx ends, the calls not yet made are
// skipped.
func parallel(ctx context.Context, n, workers int, fn func(i int) error) error {
	var (
		next     atomic.Int64
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
		failed   atomic.Bool
	)
	for range min(workers, n) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n || failed.Load() || ctx.Err() != nil {
					return
				}
				if err := fn(i); err != nil {
					errOnce.Do(func() { firstErr = err })
					failed.Store(true)
					return
				}
			}
		})
	}
	wg.Wait()
	if firstErr == nil {
		firstErr = ctx.Err()
	}
	return firstErr
}

// filled is what fillConfigMaps wrote.
type filled struct {
	refs []objectRef
	// size is the mean size of the ConfigMaps written, as JSON.
	size float64
	// others is how many ConfigMaps the namespaces held besides.
	others int
}

// fillConfigMaps writes n ConfigMaps into namespaces and measures them.
func fillConfigMaps(b *testing.B, ctx context.Context, kc kubernetes.Interface, namespaces []string, n int) filled {
	b.Helper()
	t0 := time.Now()
	refs, err := createConfigMaps(ctx, kc, namespaces, n, writers)
	if err != nil {
		b.Fatal(err)
	}
	if testing.Verbose() {
		b.Logf("wrote %d ConfigMaps in %s", n, time.Since(t0).Round(time.Millisecond))
	}
	size, err := meanObjectSize(ctx, kc, refs[:100])
	if err != nil {
		b.Fatal(err)
	}
	others, err := otherConfigMaps(ctx, kc, namespaces)
	if err != nil {
		b.Fatal(err)
	}
	return filled{refs: refs, size: size, others: others}
}
