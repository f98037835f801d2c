package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// apiMaxNameLen is the longest name the API server of the test control
// plane takes for a ClusterRole (or anything else validated only as a path
// segment), measured by creating ClusterRoles of growing names: one byte
// more is refused by etcd ("etcdserver: request is too large"), as the
// object then passes its 1.5 MiB request limit.
const apiMaxNameLen = 524_216

// longName is a name of n bytes that starts with prefix, valid for any
// object validated as a path segment (ClusterRoles, Roles, RoleBindings).
func longName(prefix string, n int) string {
	if n <= len(prefix) {
		return prefix[:n]
	}
	return prefix + strings.Repeat("x", n-len(prefix))
}

// createClusterRole creates a ClusterRole with no rules, deleted when the
// test ends, and returns it.
func createClusterRole(t *testing.T, name string) *rbacv1.ClusterRole {
	t.Helper()
	roles := kube(t).RbacV1().ClusterRoles()
	cr, err := roles.Create(t.Context(), &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create ClusterRole of %d bytes: %.300v", len(name), err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := roles.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete ClusterRole of %d bytes: %.300v", len(name), err)
		}
	})
	return cr
}

// shortName names an object in test messages: whole when short, else its
// start and length.
func shortName(name string) string {
	if len(name) <= 64 {
		return name
	}
	return fmt.Sprintf("%s... (%d bytes)", name[:64], len(name))
}
