package replica

import (
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apiserver/pkg/endpoints/request"

	"github.com/kubebus/bridge/wire"
)

func (s *Server) serveAll(w http.ResponseWriter, r *http.Request, res wire.DiscoveredResource, info *request.RequestInfo) {
	writeStatus(w, r, apierrors.NewServiceUnavailable("not yet"), "")
}
