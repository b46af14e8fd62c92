package controlplane

import (
	"net/http"

	"github.com/idnhq/idn/internal/pairwire"
)

// The dashboard's Gateways pages. The list is rendered here from the
// database; a gateway's connections and variables live on the gateway, so
// its page loads them through the RPC route (gateways.js).

type gatewaysPage struct {
	Gateways []gatewayJSON
}

func (s *Server) gatewaysView(r *http.Request, ns string) (any, error) {
	list, err := s.store.listGateways(r.Context(), ns)
	if err != nil {
		return nil, err
	}
	v := gatewaysPage{Gateways: make([]gatewayJSON, len(list))}
	for i, g := range list {
		v.Gateways[i] = s.gatewayOut(g)
	}
	return v, nil
}

type gatewayPage struct {
	Gateway gatewayJSON
	Info    string // the HPKE info prefix secrets are sealed with
}

func (s *Server) gatewayView(r *http.Request, ns string) (any, error) {
	g, err := s.store.gateway(r.Context(), ns, r.PathValue("id"))
	if err != nil {
		return nil, err
	}
	return gatewayPage{Gateway: s.gatewayOut(g), Info: pairwire.InfoPrefix}, nil
}
