package controlplane

import (
	"net/http"

	"github.com/idnhq/idn/controlplane/gatewaylink"
)

// The dashboard's Gateways pages. The list is rendered here from the
// gateway link's read API; a gateway's connections and variables live on
// the gateway, so its page loads them through the RPC route (gateways.js).

func (s *Server) gatewayPages(m *routeMux) {
	m.HandleFunc("GET /gateways", s.ownerPage("gateways", "Gateways", s.gatewaysView))
	m.HandleFunc("GET /gateways/{id}", s.ownerPage("gateway", "Gateway", s.gatewayView))
}

// gatewayRow is a gateway as the pages show it, with readable times.
type gatewayRow struct {
	gatewaylink.Gateway
	Seen, Paired string
}

func gatewayRowOf(g gatewaylink.Gateway) gatewayRow {
	return gatewayRow{Gateway: g, Seen: when(g.LastSeen), Paired: when(g.CreatedAt)}
}

type gatewaysPage struct {
	Gateways []gatewayRow
}

func (s *Server) gatewaysView(r *http.Request, ns string) (any, error) {
	list, err := s.gateways.Gateways(r.Context(), ns)
	if err != nil {
		return nil, err
	}
	v := gatewaysPage{Gateways: make([]gatewayRow, len(list))}
	for i, g := range list {
		v.Gateways[i] = gatewayRowOf(g)
	}
	return v, nil
}

type gatewayPage struct {
	Gateway gatewayRow
}

func (s *Server) gatewayView(r *http.Request, ns string) (any, error) {
	g, err := s.gateways.Gateway(r.Context(), ns, r.PathValue("id"))
	if err != nil {
		return nil, err
	}
	return gatewayPage{Gateway: gatewayRowOf(g)}, nil
}
