package controlplane

import "net/http"

// The dashboard's Gateways pages. The list is rendered here from the
// database; a gateway's connections and variables live on the gateway, so
// its page loads them through the RPC route (gateways.js).

// gatewayRow is a gateway as the pages show it, with readable times.
type gatewayRow struct {
	gatewayJSON
	Seen, Paired string
}

func (s *Server) gatewayRow(g gatewayRecord) gatewayRow {
	return gatewayRow{gatewayJSON: s.gatewayOut(g), Seen: when(g.LastSeen), Paired: when(g.CreatedAt)}
}

type gatewaysPage struct {
	Gateways []gatewayRow
}

func (s *Server) gatewaysView(r *http.Request, ns string) (any, error) {
	list, err := s.store.listGateways(r.Context(), ns)
	if err != nil {
		return nil, err
	}
	v := gatewaysPage{Gateways: make([]gatewayRow, len(list))}
	for i, g := range list {
		v.Gateways[i] = s.gatewayRow(g)
	}
	return v, nil
}

type gatewayPage struct {
	Gateway gatewayRow
}

func (s *Server) gatewayView(r *http.Request, ns string) (any, error) {
	g, err := s.store.gateway(r.Context(), ns, r.PathValue("id"))
	if err != nil {
		return nil, err
	}
	return gatewayPage{Gateway: s.gatewayRow(g)}, nil
}
