package replica

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/runtime/serializer/versioning"
)

// The replica serves objects as the bus holds them, unstructured, and
// meta.k8s.io's own types (Status, Table, WatchEvent, discovery) from a
// scheme of those alone. There is no conversion: an object is served in
// the version the bridge watched it in, the only one discovery names.

// metaScheme knows the meta.k8s.io types the replica writes, and the
// parameters (ListOptions, GetOptions, TableOptions) it reads.
var metaScheme = newMetaScheme()

func newMetaScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	v1 := schema.GroupVersion{Version: "v1"}
	// Status, WatchEvent, APIVersions, APIGroupList, APIGroup and
	// APIResourceList are written in every group version, as the API
	// server writes them.
	metav1.AddToGroupVersion(s, v1)
	metav1.AddMetaToScheme(s)
	s.AddUnversionedTypes(v1, &metav1.WatchEvent{})
	return s
}

// parameterCodec reads query parameters into meta.k8s.io options.
var parameterCodec = runtime.NewParameterCodec(metaScheme)

// objectTyper types unstructured objects by their apiVersion and kind,
// and meta.k8s.io types by metaScheme.
type objectTyper struct{}

func (objectTyper) ObjectKinds(obj runtime.Object) ([]schema.GroupVersionKind, bool, error) {
	if _, ok := obj.(runtime.Unstructured); ok {
		gvk := obj.GetObjectKind().GroupVersionKind()
		if gvk.Kind == "" {
			return nil, false, runtime.NewMissingKindErr("object has no kind")
		}
		return []schema.GroupVersionKind{gvk}, false, nil
	}
	return metaScheme.ObjectKinds(obj)
}

func (objectTyper) Recognizes(gvk schema.GroupVersionKind) bool { return true }

// objectCreater makes meta.k8s.io types from metaScheme and anything else
// unstructured.
type objectCreater struct{}

func (objectCreater) New(gvk schema.GroupVersionKind) (runtime.Object, error) {
	if metaScheme.Recognizes(gvk) {
		return metaScheme.New(gvk)
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	return u, nil
}

// objectConvertor converts nothing: unstructured objects are served as
// they are, meta.k8s.io types through metaScheme. Its field labels are
// the two the replica selects on.
type objectConvertor struct{}

func (objectConvertor) Convert(in, out, context any) error {
	return metaScheme.Convert(in, out, context)
}

func (objectConvertor) ConvertToVersion(in runtime.Object, gv runtime.GroupVersioner) (runtime.Object, error) {
	if _, ok := in.(runtime.Unstructured); ok {
		return in, nil
	}
	return metaScheme.ConvertToVersion(in, gv)
}

// ConvertFieldLabel accepts the field selectors the replica evaluates,
// metadata.name and metadata.namespace; any other is a bad request that
// names it.
func (objectConvertor) ConvertFieldLabel(gvk schema.GroupVersionKind, label, value string) (string, string, error) {
	switch label {
	case "metadata.name", "metadata.namespace":
		return label, value, nil
	}
	return "", "", fmt.Errorf("field selector %q is not supported by this read-only replica: only metadata.name and metadata.namespace are", label)
}

// codecs is the replica's runtime.NegotiatedSerializer: JSON (the stream
// form of watches included) and YAML. Protobuf and CBOR are not offered;
// clients fall back to JSON.
type codecs struct{ infos []runtime.SerializerInfo }

var serializers = newCodecs()

func newCodecs() codecs {
	opts := func(yaml, pretty bool) json.SerializerOptions {
		return json.SerializerOptions{Yaml: yaml, Pretty: pretty}
	}
	mk := func(o json.SerializerOptions) *json.Serializer {
		return json.NewSerializerWithOptions(json.DefaultMetaFactory, objectCreater{}, objectTyper{}, o)
	}
	return codecs{infos: []runtime.SerializerInfo{
		{
			MediaType:        runtime.ContentTypeJSON,
			MediaTypeType:    "application",
			MediaTypeSubType: "json",
			EncodesAsText:    true,
			Serializer:       mk(opts(false, false)),
			PrettySerializer: mk(opts(false, true)),
			StreamSerializer: &runtime.StreamSerializerInfo{
				EncodesAsText: true,
				Serializer:    mk(opts(false, false)),
				Framer:        json.Framer,
			},
		},
		{
			MediaType:        runtime.ContentTypeYAML,
			MediaTypeType:    "application",
			MediaTypeSubType: "yaml",
			EncodesAsText:    true,
			Serializer:       mk(opts(true, false)),
		},
	}}
}

func (c codecs) SupportedMediaTypes() []runtime.SerializerInfo { return c.infos }

func (c codecs) EncoderForVersion(enc runtime.Encoder, gv runtime.GroupVersioner) runtime.Encoder {
	return versioning.NewCodec(enc, nil, objectConvertor{}, objectCreater{}, objectTyper{}, nil, gv, nil, "replica")
}

func (c codecs) DecoderToVersion(dec runtime.Decoder, gv runtime.GroupVersioner) runtime.Decoder {
	return versioning.NewCodec(nil, dec, objectConvertor{}, objectCreater{}, objectTyper{}, nil, nil, gv, "replica")
}
