package replica

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	apiversion "k8s.io/apimachinery/pkg/version"
	"k8s.io/apiserver/pkg/endpoints/filters"
	"k8s.io/apiserver/pkg/endpoints/handlers"
	"k8s.io/apiserver/pkg/endpoints/handlers/negotiation"
	"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters"
	"k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/kubebus/bridge/internal/replica/access"
	"github.com/kubebus/bridge/internal/version"
	"github.com/kubebus/bridge/wire"
)

// requestInfo reads a request's path, once its /clusters/<name> prefix is
// taken off, as the API server reads its own.
var requestInfo = &request.RequestInfoFactory{
	APIPrefixes:          sets.NewString("api", "apis"),
	GrouplessAPIPrefixes: sets.NewString("api"),
}

// Handler serves the replica's API under /clusters/<name> and
// /clusters/*. Each request is authenticated, then answered by gate if it
// is a write or names a cluster not on the bus, then authorized (with its
// cluster in its context), before anything is read.
func (s *Server) Handler() http.Handler {
	var h http.Handler = http.HandlerFunc(s.serve)
	h = filters.WithAuthorization(h, s.cfg.Rules, serializers)
	gated := s.gate(h)
	h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		noteVerb(r)
		gated.ServeHTTP(w, r)
	})
	h = filters.WithAuthentication(h, s.cfg.Authenticator, filters.Unauthorized(serializers), nil, nil)
	h = filters.WithWarningRecorder(h)
	withInfo := filters.WithRequestInfo(h, requestInfo)
	return s.m.counted(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.clusterPrefix(withInfo, w, r)
	}))
}

// clusterPrefix takes /clusters/<name> off the path, puts the name in the
// request's context (access.WithCluster) for gate, and hands the request
// to h.
func (s *Server) clusterPrefix(h http.Handler, w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	tail, ok := strings.CutPrefix(r.URL.Path, "/clusters/")
	if !ok {
		writeStatus(w, r, apierrors.NewNotFound(schema.GroupResource{}, r.URL.Path), "this read-only replica serves each cluster under /clusters/<name>/, and all of them under /clusters/*/")
		return
	}
	name, path, _ := strings.Cut(tail, "/")
	if name != access.AllClusters {
		if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
			writeStatus(w, r, apierrors.NewBadRequest(""), fmt.Sprintf("cluster name %q in the path is not valid: %s", truncate(name, 80), strings.Join(errs, "; ")))
			return
		}
	}
	r = r.Clone(access.WithCluster(ctx, name))
	r.URL.Path = "/" + path
	r.URL.RawPath = ""
	h.ServeHTTP(w, r)
}

// serve answers an authenticated, authorized request.
func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	cluster, _ := access.ClusterFrom(ctx)
	info, ok := request.RequestInfoFrom(ctx)
	if !ok {
		writeStatus(w, r, apierrors.NewInternalError(fmt.Errorf("no request info")), "")
		return
	}
	var resources []wire.DiscoveredResource
	if cluster == access.AllClusters {
		attrs, err := filters.GetAuthorizerAttributes(ctx)
		if err != nil {
			writeStatus(w, r, apierrors.NewInternalError(err), "")
			return
		}
		// The clusters this very request is allowed on, from one version
		// of the rules.
		resources = s.disc.merged(s.cfg.Rules.Current().Scope(attrs).Has)
	} else {
		resources, _ = s.disc.resources(cluster)
	}
	if !info.IsResourceRequest {
		s.serveDiscovery(w, r, cluster, resources, info)
		return
	}
	if info.Subresource != "" {
		writeStatus(w, r, apierrors.NewNotFound(schema.GroupResource{Group: info.APIGroup, Resource: info.Resource + "/" + info.Subresource}, info.Name),
			fmt.Sprintf("this read-only replica serves no subresource (%q of %s)", info.Subresource, info.Resource))
		return
	}
	res, ok := findResource(resources, info.APIGroup, info.APIVersion, info.Resource)
	if !ok {
		gr := schema.GroupResource{Group: info.APIGroup, Resource: info.Resource}
		writeStatus(w, r, apierrors.NewNotFound(gr, ""),
			fmt.Sprintf("the bus holds no resource %s in version %q of cluster %q", gr, info.APIVersion, cluster))
		return
	}
	if !res.Namespaced && info.Namespace != "" && !namespaceItself(info) {
		gr := schema.GroupResource{Group: info.APIGroup, Resource: info.Resource}
		writeStatus(w, r, apierrors.NewNotFound(gr, info.Name),
			fmt.Sprintf("%s is cluster-scoped: there is none in namespace %q (as the API server, this replica serves it only outside /namespaces/<name>/)", gr, truncate(info.Namespace, 253)))
		return
	}
	if cluster == access.AllClusters {
		s.serveAll(w, r, res, info)
		return
	}
	gvr := res.GroupVersionResource()
	store, err := s.store(ctx, cluster, gvr)
	if err != nil {
		writeStatus(w, r, storeError(err, cluster, gvr), "")
		return
	}
	st := &storage{s: s, cluster: cluster, res: res, store: store, table: newTableConvertor(res, false)}
	s.serveResource(w, r, st, res, info)
}

// namespaceItself reports whether info is a Namespace object's own path,
// /api/v1/namespaces/<name> or its status or finalize, which RequestInfo
// puts in namespace <name> although Namespaces are cluster-scoped; and not
// /api/v1/namespaces/<ns>/namespaces/..., which it reads alike.
func namespaceItself(info *request.RequestInfo) bool {
	if info.APIGroup != "" || info.Resource != "namespaces" || info.Name != info.Namespace {
		return false
	}
	own := "/api/" + info.APIVersion + "/namespaces/" + info.Namespace
	return info.Path == own || info.Path == own+"/status" || info.Path == own+"/finalize"
}

// serveResource hands the request to the API server's own handlers.
func (s *Server) serveResource(w http.ResponseWriter, r *http.Request, st resourceStorage, res wire.DiscoveredResource, info *request.RequestInfo) {
	scope := scopeOf(res, st)
	if info.Verb == "get" {
		handlers.GetResource(st, scope).ServeHTTP(w, r)
		return
	}
	if info.Verb == "watch" {
		// The caps count from here, after authentication and
		// authorization, until the handler returns: the client gone, the
		// timeout, or the watch cut.
		var name string
		if u, ok := request.UserFrom(r.Context()); ok {
			name = u.GetName()
		}
		release, err := s.caps.take(name)
		if err != nil {
			var ce *capError
			if errors.As(err, &ce) {
				s.m.refused.WithLabelValues(ce.cap).Inc()
			}
			writeStatus(w, r, apierrors.NewTooManyRequests(err.Error(), 1), "")
			return
		}
		defer release()
	}
	// The legacy /watch/ path carries no ?watch=true: RequestInfo reads
	// it as a watch, and it was authorized as one, so it is served as one.
	handlers.ListResource(st, st, scope, info.Verb == "watch", s.cfg.MinRequestTimeout).ServeHTTP(w, r)
}

// resourceStorage is what serveResource serves from.
type resourceStorage interface {
	rest.Getter
	rest.Lister
	rest.Watcher
}

// scopeOf is the RequestScope of res's objects: unstructured, in the one
// version discovery names.
func scopeOf(res wire.DiscoveredResource, tc rest.TableConvertor) *handlers.RequestScope {
	gvr := res.GroupVersionResource()
	return &handlers.RequestScope{
		Namer:                    handlers.ContextBasedNaming{Namer: meta.NewAccessor(), ClusterScoped: !res.Namespaced},
		Serializer:               serializers,
		ParameterCodec:           parameterCodec,
		StandardSerializers:      serializers.SupportedMediaTypes(),
		Creater:                  objectCreater{},
		Convertor:                objectConvertor{},
		UnsafeConvertor:          objectConvertor{},
		Typer:                    objectTyper{},
		EquivalentResourceMapper: runtime.NewEquivalentResourceRegistry(),
		TableConvertor:           tc,
		Resource:                 gvr,
		Kind:                     gvr.GroupVersion().WithKind(res.Kind),
		MetaGroupVersion:         metav1.SchemeGroupVersion,
		HubGroupVersion:          gvr.GroupVersion(),
	}
}

// notOnBus is the 404 of a cluster with no discovery document.
func notOnBus(cluster string) error {
	err := apierrors.NewNotFound(schema.GroupResource{Resource: "clusters"}, cluster)
	err.ErrStatus.Message = fmt.Sprintf("cluster %q is not on the bus: no bridge has published its discovery", cluster)
	return err
}

// readOnly answers a write: 405, naming the cluster's API server when
// named is set.
func (s *Server) readOnly(w http.ResponseWriter, r *http.Request, cluster string, info *request.RequestInfo, named bool) {
	where := "its API server"
	if doc, ok := s.disc.cluster(cluster); ok && named && doc.Server != "" {
		where = "its API server, " + doc.Server
	}
	msg := fmt.Sprintf("%s is not allowed: this is a read-only replica of cluster %q fed by the bus; send writes to %s", info.Verb, cluster, where)
	if cluster == access.AllClusters {
		msg = fmt.Sprintf("%s is not allowed: this is the read-only all-clusters view of the bus; send writes to each cluster's API server", info.Verb)
	}
	err := &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusMethodNotAllowed, Reason: metav1.StatusReasonMethodNotAllowed,
		Message: msg,
		Details: &metav1.StatusDetails{Group: info.APIGroup, Kind: info.Resource, Name: info.Name},
	}}
	writeStatus(w, r, err, "")
}

func storeError(err error, cluster string, gvr schema.GroupVersionResource) error {
	if errors.Is(err, errNotSynced) {
		return apierrors.NewTimeoutError(fmt.Sprintf("the cache of %s in cluster %q has not read the bus's state yet", gvr.GroupResource(), cluster), 1)
	}
	if apierrors.IsNotFound(err) {
		return err
	}
	return apierrors.NewServiceUnavailable(err.Error())
}

// writeStatus writes err as a Status; msg, when set, replaces its message.
func writeStatus(w http.ResponseWriter, r *http.Request, err error, msg string) {
	if se, ok := err.(*apierrors.StatusError); ok && msg != "" {
		se.ErrStatus.Message = msg
	}
	responsewriters.ErrorNegotiated(err, serializers, schema.GroupVersion{Version: "v1"}, w, r)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// serveDiscovery answers /api, /apis, /apis/<group>, the group versions'
// resource lists, and /version.
func (s *Server) serveDiscovery(w http.ResponseWriter, r *http.Request, cluster string, resources []wire.DiscoveredResource, info *request.RequestInfo) {
	parts := strings.Split(strings.Trim(info.Path, "/"), "/")
	write := func(obj runtime.Object) {
		responsewriters.WriteObjectNegotiated(serializers, negotiation.DefaultEndpointRestrictions, schema.GroupVersion{Version: "v1"}, w, r, http.StatusOK, obj, false)
	}
	switch {
	case info.Path == "/version":
		responsewriters.WriteRawJSON(http.StatusOK, versionInfo(), w)
	case len(parts) == 1 && parts[0] == "api":
		write(&metav1.APIVersions{Versions: []string{"v1"}})
	case len(parts) == 2 && parts[0] == "api" && parts[1] == "v1":
		write(resourceList("", "v1", resources))
	case len(parts) == 1 && parts[0] == "apis":
		write(&metav1.APIGroupList{Groups: groups(resources)})
	case len(parts) == 2 && parts[0] == "apis":
		for _, g := range groups(resources) {
			if g.Name == parts[1] {
				write(&g)
				return
			}
		}
		writeStatus(w, r, apierrors.NewNotFound(schema.GroupResource{}, ""), fmt.Sprintf("the bus holds no group %q of cluster %q", truncate(parts[1], 253), cluster))
	case len(parts) == 3 && parts[0] == "apis":
		l := resourceList(parts[1], parts[2], resources)
		if len(l.APIResources) == 0 {
			writeStatus(w, r, apierrors.NewNotFound(schema.GroupResource{}, ""), fmt.Sprintf("the bus holds no group version %q of cluster %q", truncate(parts[1]+"/"+parts[2], 253), cluster))
			return
		}
		write(l)
	default:
		writeStatus(w, r, apierrors.NewNotFound(schema.GroupResource{}, ""), fmt.Sprintf("this read-only replica serves no path %q", truncate(info.Path, 253)))
	}
}

// readVerbs are the verbs of every resource the replica serves.
var readVerbs = metav1.Verbs{"get", "list", "watch"}

func resourceList(group, version string, resources []wire.DiscoveredResource) *metav1.APIResourceList {
	gv := schema.GroupVersion{Group: group, Version: version}
	l := &metav1.APIResourceList{GroupVersion: gv.String(), APIResources: []metav1.APIResource{}}
	for _, res := range resources {
		if res.Group != group || res.Version != version {
			continue
		}
		l.APIResources = append(l.APIResources, metav1.APIResource{
			Name: res.Resource, SingularName: res.Singular, Namespaced: res.Namespaced, Kind: res.Kind,
			Verbs: readVerbs, ShortNames: res.ShortNames, Categories: res.Categories,
		})
	}
	sort.Slice(l.APIResources, func(i, j int) bool { return l.APIResources[i].Name < l.APIResources[j].Name })
	return l
}

// groups are the API groups of resources (the core group left out, as
// /apis leaves it), each with the versions the bus holds.
func groups(resources []wire.DiscoveredResource) []metav1.APIGroup {
	versions := map[string][]string{}
	for _, res := range resources {
		if res.Group != "" && !slices.Contains(versions[res.Group], res.Version) {
			versions[res.Group] = append(versions[res.Group], res.Version)
		}
	}
	names := make([]string, 0, len(versions))
	for g := range versions {
		names = append(names, g)
	}
	sort.Strings(names)
	out := make([]metav1.APIGroup, 0, len(names))
	for _, name := range names {
		g := metav1.APIGroup{Name: name}
		for _, v := range versions[name] {
			g.Versions = append(g.Versions, metav1.GroupVersionForDiscovery{GroupVersion: name + "/" + v, Version: v})
		}
		g.PreferredVersion = g.Versions[0]
		out = append(out, g)
	}
	return out
}

// versionInfo is what /version answers: the replica's own build, since
// the clusters' versions differ and are not on the bus.
func versionInfo() apiversion.Info {
	v := version.Read()
	return apiversion.Info{GitVersion: v.Version, GitCommit: v.Revision, Platform: "kubebus-replica"}
}
