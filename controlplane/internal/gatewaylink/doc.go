// Package gatewaylink links gateways that run elsewhere (on a laptop,
// behind NAT) to their owner's control plane, so the owner manages them
// from the dashboard.
//
// The owner starts a pairing session (POST /v1/gateways/pairings) and gets
// a one-time code: 8 characters of Crockford base32 (40 bits). The code is
// stored as a SHA-256 bound to its session, is single use and is valid
// PairingTTL; MaxPairingFailures wrong codes end the session. The gateway
// opens a WebSocket to /v1/gateways/connect with an upgrade signed by its
// own identity and presents the code in its first message. The upgrade's
// nonce is recorded only once the key is paired or names a session that can
// still complete, so a stranger's upgrade writes nothing. From then on the
// gateway's signing key alone lets it reconnect. That lasts until the owner
// unpairs it (DELETE /v1/gateways/{id}) or deletes the account
// (Link.UnpairNamespace). Then the row goes and the key is unknown. The
// socket is closed with code 4403 at once, wherever it is held.
//
// The owner's RPCs (POST /v1/gateways/{id}/rpc, JSON-RPC 2.0) are relayed
// to the gateway's socket. Each is answered with the gateway's response
// under the owner's id, and waits Config.RPCTimeout for it (504
// GATEWAY_TIMEOUT). No owner holds more than MaxRPCsPerOwner RPCs waiting
// on an instance, and no gateway more than MaxRPCsPerGateway. So one
// owner's gateway that never answers ties up a bounded share. Secrets never
// pass here in clear: the dashboard seals them to the gateway's HPKE key,
// and the gateway refuses plaintext.
//
// One instance at a time holds a gateway's socket, and the gateways row
// names it. A heartbeat (Config.Heartbeat) refreshes last_seen, so a
// gateway counts as offline three heartbeats after its instance died. Each
// Link has a hub, its own sockets and its own relay channel. On PostgreSQL
// an RPC that reaches another instance is NOTIFYed to the holder's channel
// and answered on the sender's. A message over 7,000 bytes travels in a
// gateway_relay row. The LISTEN connection is open only while the instance
// holds a socket or waits for an answer (and 30 s after). On SQLite the
// relay is in process: one instance per database file.
//
// The control plane composes a Link from its database, its web kit, its
// owner-session middleware and its signed-request admission (Deps). It
// mounts Routes and runs Maintain with its other periodic work. It
// registers Close with http.Server.RegisterOnShutdown, since Shutdown
// leaves WebSockets open. The dashboard reads Gateways and Gateway to
// render its pages; the activity part admits a gateway's signed reports
// with PairedKey.
package gatewaylink
