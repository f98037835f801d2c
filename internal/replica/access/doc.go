// Package access decides who may read what from the replica.
package access

import (
	_ "k8s.io/apiserver/pkg/authentication/request/x509"
	_ "k8s.io/apiserver/pkg/server/dynamiccertificates"
	_ "k8s.io/apiserver/pkg/endpoints/filters"
	_ "sigs.k8s.io/json"
)
