package source

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/kubebus/bridge/internal/rawobject"
)

// Path says how a source hands objects on, decided when it is made.
type Path string

const (
	// PathRaw hands on each object's JSON exactly as the API server sent
	// it (Delta.Raw), reading only its identity (rawobject.Scan): nothing
	// is decoded into maps.
	PathRaw Path = "raw"
	// PathParsed decodes every object into an unstructured one
	// (Delta.Object), with metadata.managedFields dropped unless kept.
	// Options.OldObject needs it: the previous state is kept decoded.
	PathParsed Path = "parsed"
)

// NewRESTClient returns the client of the raw path (Options.REST) for cfg,
// which must be wrapped with WrapTransport, as New's client is. Build
// New's client on it (dynamic.New) so that both share one connection
// pool.
func NewRESTClient(cfg *rest.Config) (*rest.RESTClient, error) {
	c := dynamic.ConfigFor(cfg)
	c.GroupVersion = nil
	// Every request of the raw path names its absolute path.
	c.APIPath = "/not-used-by-the-raw-path"
	rc, err := rest.UnversionedRESTClientFor(c)
	if err != nil {
		return nil, fmt.Errorf("source: REST client: %w", err)
	}
	return rc, nil
}

// apiClient lists and watches one resource in one namespace.
type apiClient interface {
	List(ctx context.Context, o metav1.ListOptions) (runtime.Object, error)
	Watch(ctx context.Context, o metav1.ListOptions) (watch.Interface, error)
	// Get reads one object, as a list or a watch hands it on.
	Get(ctx context.Context, name string) (object, error)
}

// parsedClient is the parsed path's apiClient: a dynamic client, which
// decodes every object into an unstructured one.
type parsedClient struct{ ri dynamic.ResourceInterface }

func (c parsedClient) List(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
	list, err := c.ri.List(ctx, o)
	if err != nil {
		return nil, err
	}
	return list, nil
}

func (c parsedClient) Watch(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	return c.ri.Watch(ctx, o)
}

func (c parsedClient) Get(ctx context.Context, name string) (object, error) {
	if name == "" {
		return object{}, errors.New("source: get an object without a name")
	}
	u, err := c.ri.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return object{}, err
	}
	return parsedObject(u), nil
}

// rawClient is the raw path's apiClient: its lists hold, and its watches
// deliver, rawObjects, each holding the object's JSON exactly as the API
// server sent it. Lists streamed as watches (sendInitialEvents) and plain
// lists, paged or not, are served alike.
type rawClient struct {
	rest rest.Interface
	res  Resource
	ns   string
}

var _ apiClient = rawClient{}

// parameterCodec writes list options as query parameters, as the dynamic
// client does.
var (
	parameterScheme = runtime.NewScheme()
	parameterCodec  = runtime.NewParameterCodec(parameterScheme)
	versionV1       = schema.GroupVersion{Version: "v1"}
)

func init() { metav1.AddToGroupVersion(parameterScheme, versionV1) }

func (c rawClient) request(o *metav1.ListOptions) *rest.Request {
	path := []string{"api"}
	if c.res.Group != "" {
		path = []string{"apis", c.res.Group}
	}
	path = append(path, c.res.Version)
	if c.ns != "" {
		path = append(path, "namespaces", c.ns)
	}
	path = append(path, c.res.Resource)
	return c.rest.Get().AbsPath(path...).SpecificallyVersionedParams(o, parameterCodec, versionV1).
		// The raw path reads JSON, whatever the client would accept.
		SetHeader("Accept", "application/json")
}

// List lists the resource: a *rawList whose items point into the answer's
// body, which they keep alive until they are handed on and forgotten.
func (c rawClient) List(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
	res := c.request(&o).Do(ctx)
	// Error, not Raw's error: it is the API server's Status (Forbidden,
	// NotFound, Expired...), where Raw's is only the HTTP status.
	if err := res.Error(); err != nil {
		return nil, err
	}
	body, err := res.Raw()
	if err != nil {
		return nil, err
	}
	list := &rawList{}
	lm, err := rawobject.ScanList(body, func(data []byte, m rawobject.Meta) error {
		list.Items = append(list.Items, newRawObject(data, m))
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("source: list of %s%s: %w", c.res.Name(), inNamespace(c.ns), err)
	}
	list.ResourceVersion, list.Continue = lm.ResourceVersion, lm.Continue
	return list, nil
}

// Get reads one object of the resource, as the API server sent it.
func (c rawClient) Get(ctx context.Context, name string) (object, error) {
	if name == "" || name == "." || name == ".." || strings.Contains(name, "/") {
		return object{}, fmt.Errorf("source: %q is not an object's name", name)
	}
	res := c.request(&metav1.ListOptions{}).Suffix(name).Do(ctx)
	if err := res.Error(); err != nil {
		return object{}, err
	}
	body, err := res.Raw()
	if err != nil {
		return object{}, err
	}
	m, err := rawobject.Scan(body)
	if err != nil {
		return object{}, fmt.Errorf("source: %s %s%s: %w", c.res.Name(), name, inNamespace(c.ns), err)
	}
	return newRawObject(body, m).object(), nil
}

// Watch watches the resource, as client-go's REST client does, but reads
// its events with eventDecoder.
func (c rawClient) Watch(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	o.Watch = true
	body, err := c.request(&o).Stream(ctx)
	if err != nil {
		if utilnet.IsProbableEOF(err) || utilnet.IsTimeout(err) {
			// As client-go's watch: a connection that broke before the
			// answer is a watch that ended at once.
			return watch.NewEmptyWatch(), nil
		}
		return nil, err
	}
	return watch.NewStreamWatcher(newEventDecoder(body),
		// 500, as client-go's watch: the cause of a decoding error is
		// unknown.
		apierrors.NewClientErrorReporter(http.StatusInternalServerError, "GET", "ClientWatchDecoding")), nil
}

// rawObject is how an object of the raw path goes through the reflector:
// its identity in the fields that the reflector and its stores read
// (meta.Accessor), and the object as the API server sent it. A bookmark
// has no raw object, only its resourceVersion and annotations.
type rawObject struct {
	metav1.TypeMeta
	metav1.ObjectMeta
	raw *RawObject
}

var _ runtime.Object = (*rawObject)(nil)

func newRawObject(data []byte, m rawobject.Meta) *rawObject {
	return &rawObject{
		TypeMeta: metav1.TypeMeta{APIVersion: m.APIVersion, Kind: m.Kind},
		ObjectMeta: metav1.ObjectMeta{Namespace: m.Namespace, Name: m.Name, UID: types.UID(m.UID),
			ResourceVersion: m.ResourceVersion},
		raw: &RawObject{data: data, scan: m},
	}
}

// DeepCopyObject copies the identity; the raw object, never modified, is
// shared.
func (o *rawObject) DeepCopyObject() runtime.Object {
	c := &rawObject{TypeMeta: o.TypeMeta, raw: o.raw}
	o.ObjectMeta.DeepCopyInto(&c.ObjectMeta)
	return c
}

// object is what the tracker takes of o.
func (o *rawObject) object() object {
	m := &o.raw.scan
	return object{namespace: m.Namespace, name: m.Name, uid: m.UID, rv: m.ResourceVersion, raw: o.raw}
}

// rawList is a list of the raw path: its items are *rawObject.
type rawList struct {
	metav1.TypeMeta
	metav1.ListMeta
	Items []runtime.Object
}

var _ runtime.Object = (*rawList)(nil)

func (l *rawList) DeepCopyObject() runtime.Object {
	c := &rawList{TypeMeta: l.TypeMeta, Items: make([]runtime.Object, len(l.Items))}
	l.ListMeta.DeepCopyInto(&c.ListMeta)
	for i, it := range l.Items {
		c.Items[i] = it.DeepCopyObject()
	}
	return c
}
