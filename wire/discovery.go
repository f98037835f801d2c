package wire

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Discovery is what one bridge tells of its cluster's API: the resources
// it publishes, as the cluster's discovery describes them. A bridge
// publishes one document per cluster, whenever the set of resources it
// watches changes (a CRD created, changed or deleted) and at every start;
// the bus keeps the latest one of each cluster (DiscoverySubject on NATS,
// the key Cluster on DiscoveryTopic on Kafka). A program that serves the
// cluster's state from the bus (the replica) answers discovery from it.
//
// It is JSON (see MarshalDiscovery), with the member names of the struct
// tags; readers ignore members they do not know.
type Discovery struct {
	// Cluster is the bridge's BRIDGE_CLUSTER_NAME.
	Cluster string `json:"cluster"`
	// Server is the address of the cluster's API server as the bridge
	// reaches it (its host, such as "https://10.0.0.1:443"), so that a
	// reader can tell users where to send writes. Empty when unknown.
	Server string `json:"server,omitempty"`
	// Time is when the bridge made the document.
	Time time.Time `json:"time"`
	// Resources are the resources the bridge publishes, one per group and
	// resource, in the version the bridge watches.
	Resources []DiscoveredResource `json:"resources"`
}

// DiscoveredResource is one resource the bridge publishes, as the
// cluster's discovery and, for a CRD, its definition describe it.
type DiscoveredResource struct {
	Group    string `json:"group"`
	Version  string `json:"version"`
	Resource string `json:"resource"`
	Kind     string `json:"kind"`
	// Singular is the resource's singular name, such as "configmap".
	Singular   string   `json:"singular,omitempty"`
	Namespaced bool     `json:"namespaced"`
	ShortNames []string `json:"shortNames,omitempty"`
	Categories []string `json:"categories,omitempty"`
	// Columns are a CRD's additionalPrinterColumns for this version;
	// empty for built-in kinds and CRDs that define none.
	Columns []PrinterColumn `json:"columns,omitempty"`
}

// GroupVersionResource is r's group, version and resource.
func (r DiscoveredResource) GroupVersionResource() schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: r.Group, Version: r.Version, Resource: r.Resource}
}

// PrinterColumn is one of a CRD's additionalPrinterColumns, as the CRD
// defines it.
type PrinterColumn struct {
	Name        string `json:"name"`
	Type        string `json:"type"`
	Format      string `json:"format,omitempty"`
	Description string `json:"description,omitempty"`
	Priority    int32  `json:"priority,omitempty"`
	JSONPath    string `json:"jsonPath"`
}

// DiscoveryContentType is the content type of a discovery document on
// the bus (the Content-Type header on NATS, content-type on Kafka).
const DiscoveryContentType = "application/vnd.kubebus.discovery+json"

// MaxDiscoveryBytes bounds a discovery document a reader accepts.
const MaxDiscoveryBytes = 4 << 20

// MarshalDiscovery is d as it goes on the bus.
func MarshalDiscovery(d Discovery) ([]byte, error) {
	if d.Cluster == "" {
		return nil, errors.New("wire: discovery names no cluster")
	}
	return json.Marshal(d)
}

// UnmarshalDiscovery reads a discovery document as MarshalDiscovery
// writes it, and checks that it names its cluster and that each resource
// has a version, a resource and a kind.
func UnmarshalDiscovery(data []byte) (Discovery, error) {
	if len(data) > MaxDiscoveryBytes {
		return Discovery{}, fmt.Errorf("wire: discovery document of %d bytes, more than %d", len(data), MaxDiscoveryBytes)
	}
	var d Discovery
	if err := json.Unmarshal(data, &d); err != nil {
		return Discovery{}, fmt.Errorf("wire: discovery document: %w", err)
	}
	if d.Cluster == "" {
		return Discovery{}, errors.New("wire: discovery document names no cluster")
	}
	for i, r := range d.Resources {
		if r.Version == "" || r.Resource == "" || r.Kind == "" {
			return Discovery{}, fmt.Errorf("wire: discovery document of cluster %q: resource %d (%q) lacks a version, a resource or a kind", d.Cluster, i, r.Resource)
		}
	}
	return d, nil
}

// discoveryToken is the token, after the subject prefix, of the subjects
// of discovery documents; no cluster's token can be it, since cluster
// names have no underscore.
const discoveryToken = "_discovery"

// DiscoverySubject is the NATS subject of cluster's discovery document:
// "<prefix>._discovery.<cluster token>" (EscapeToken). The stream the
// bridge writes to holds it, one message per subject.
func DiscoverySubject(prefix, cluster string) string {
	return prefix + "." + discoveryToken + "." + EscapeToken(cluster)
}

// DiscoverySubjects is the filter of every cluster's discovery document
// under prefix.
func DiscoverySubjects(prefix string) string {
	return prefix + "." + discoveryToken + ".*"
}

// DiscoveryTopic is the Kafka topic of discovery documents under a topic
// prefix, "<prefix>._discovery": compacted, keyed by cluster name. No
// resource's topic can be it, since resource names have no underscore.
func DiscoveryTopic(prefix string) string {
	return prefix + "." + discoveryToken
}
