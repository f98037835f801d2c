package source

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"
)

// followClient serves one CRD, and fails the first lists of CRDs with
// err.
func followClient(err error, failures int32) *dynamicfake.FakeDynamicClient {
	crd := crdObject(schema.GroupResource{Group: "example.com", Resource: "gizmos"}, true, true)
	crd.SetAPIVersion("apiextensions.k8s.io/v1")
	crd.SetKind("CustomResourceDefinition")
	c := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		crdResource: "CustomResourceDefinitionList", apiServiceResource: "APIServiceList"}, crd)
	var n atomic.Int32
	c.PrependReactor("list", crdResource.Resource, func(k8stesting.Action) (bool, runtime.Object, error) {
		if n.Add(1) <= failures {
			return true, nil, err
		}
		return false, nil, nil
	})
	return c
}

// A failed first list of CRDs is retried by the informer: the set follows
// the cluster once the API server answers. Only a forbidden one is given
// up on.
func TestFollowerRetriesAFailedList(t *testing.T) {
	for _, tc := range []struct {
		name    string
		err     error
		follows bool
	}{
		{"the API server failing", apierrors.NewInternalError(errors.New("etcd")), true},
		{"forbidden", apierrors.NewForbidden(crdResource.GroupResource(), "", errors.New("no")), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			changed := make(chan struct{}, 100)
			f := &follower{client: followClient(tc.err, 2), log: slog.New(slog.DiscardHandler), changed: func() {
				select {
				case changed <- struct{}{}:
				default:
				}
			}}
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan struct{})
			go func() { defer close(done); f.run(ctx) }()
			defer func() { cancel(); <-done }()
			select {
			case <-changed:
				if !tc.follows {
					t.Fatal("told of a change; want the CRDs not followed while forbidden")
				}
				if served, _ := f.expected(); !served[schema.GroupResource{Group: "example.com", Resource: "gizmos"}] {
					t.Errorf("expected served %v; want gizmos.example.com", served)
				}
			case <-time.After(3 * time.Second):
				if tc.follows {
					t.Fatal("not told of the CRD within 3s; the informer retries its list within a second or two")
				}
			}
		})
	}
}
