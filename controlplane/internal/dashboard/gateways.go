package dashboard

import (
	"errors"
	"github.com/idnhq/idn/controlplane/internal/web"
	"net/http"

	"github.com/idnhq/idn/controlplane/internal/claims"
	"github.com/idnhq/idn/controlplane/internal/gatewaylink"
)

// The dashboard's Gateways pages. The list is rendered here from the
// gateway link's read API; a gateway's connections and variables live on
// the gateway, so its page loads them through the RPC route (gateways.js).

func (d *Dashboard) gatewayPages(m web.Mux) {
	m.Handle("GET /gateways", http.HandlerFunc(d.ownerPage("gateways", "Gateways", d.gatewaysView)))
	m.Handle("GET /gateways/{id}", http.HandlerFunc(d.ownerPage("gateway", "Gateway", d.gatewayView)))
	m.Handle("GET "+gatewaylink.CallbackPath, http.HandlerFunc(d.ownerPage("connected", "Connect an account", d.connectedView)))
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

func (d *Dashboard) gatewaysView(r *http.Request, ns string) (any, error) {
	list, err := d.gateways.Gateways(r.Context(), ns)
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
	// Services are the owner's, which a connection's service must name.
	Services []claims.Service
}

func (d *Dashboard) gatewayView(r *http.Request, ns string) (any, error) {
	g, err := d.gateways.Gateway(r.Context(), ns, r.PathValue("id"))
	if err != nil {
		return nil, err
	}
	services, err := d.claims.Services(r.Context(), ns)
	return gatewayPage{Gateway: gatewayRowOf(g), Services: services}, err
}

// connectedPage is the outcome of an OAuth account's connect flow, as the
// provider's redirect ended it. It names the account, never a token.
type connectedPage struct {
	GatewayID, GatewayName, Connection, Subject string
	OK                                          bool
	Message, Code                               string
}

// connectedView relays the provider's redirect to the gateway that keeps
// the flow (gatewaylink.FinishConnect) and tells the owner how it ended.
func (d *Dashboard) connectedView(r *http.Request, ns string) (any, error) {
	res, err := d.gateways.FinishConnect(r.Context(), ns, r.URL.Query())
	if errors.Is(err, gatewaylink.ErrConnectFlowUnknown) {
		return nil, err
	}
	v := connectedPage{GatewayID: res.GatewayID, GatewayName: res.GatewayID, Connection: res.ConnectionID, Subject: res.Subject, OK: err == nil}
	if g, gerr := d.gateways.Gateway(r.Context(), ns, res.GatewayID); gerr == nil {
		v.GatewayName = g.Name
	}
	if err != nil {
		e := web.Answer(err)
		if e.Code().Status() >= 500 {
			d.kit.Log.ErrorContext(r.Context(), "connect flow failed", "err", err)
		}
		v.Message, v.Code = e.Message, e.Code().String()
	}
	return v, nil
}
