package gatewaylink

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/idnhq/idn/apierror"
	"github.com/idnhq/idn/controlplane/internal/sqldb"
	"github.com/idnhq/idn/controlplane/internal/web"
	"github.com/idnhq/idn/identity"
	"github.com/idnhq/idn/pairing/pairwire"
)

// openDB opens cfg's database, as one control-plane process does.
func openDB(tb testing.TB, cfg sqldb.Config) *sqldb.DB {
	tb.Helper()
	db, err := sqldb.Open(context.Background(), cfg)
	if err != nil {
		tb.Fatalf("open %s database: %v", cfg.Provider, err)
	}
	tb.Cleanup(func() { db.Close() })
	return db
}

// seedNamespace creates namespace ns and its account.
func seedNamespace(tb testing.TB, db *sqldb.DB, ns string) {
	tb.Helper()
	ctx, now := context.Background(), sqldb.Micros(time.Now())
	if _, err := db.Exec(ctx, `INSERT INTO accounts (id, created_at) VALUES ($1, $2)`, "acc_"+ns, now); err != nil {
		tb.Fatal(err)
	}
	if _, err := db.Exec(ctx, `INSERT INTO namespaces (namespace, owner_id, created_at, updated_at) VALUES ($1, $2, $3, $3)`,
		ns, "acc_"+ns, now); err != nil {
		tb.Fatal(err)
	}
}

// newTestLink is a link on db whose owner is named by the X-Test-Owner
// header and whose signed upgrades are all refused: the tests here drive
// its parts directly.
func newTestLink(tb testing.TB, db *sqldb.DB, cfg Config) *Link {
	tb.Helper()
	kit := &web.Kit{Log: slog.New(slog.DiscardHandler), Clock: time.Now, MaxBodyBytes: 1 << 20}
	refuse := func(w http.ResponseWriter, r *http.Request) { apierror.Write(w, r, web.ErrUnauthenticated) }
	l, err := New(cfg, Deps{
		DB:  db,
		Kit: kit,
		Owner: func(next web.OwnerHandler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				ns := r.Header.Get("X-Test-Owner")
				if ns == "" {
					refuse(w, r)
					return
				}
				next(w, r, ns)
			})
		},
		Signed: Signed{
			Verify: func(w http.ResponseWriter, r *http.Request) (*identity.Caller, bool) { refuse(w, r); return nil, false },
			RecordNonce: func(w http.ResponseWriter, r *http.Request, _ *identity.Caller) bool {
				refuse(w, r)
				return false
			},
		},
		Quotas: Quotas{OpenPairings: 5, Gateways: 5},
	})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(l.Close)
	return l
}

// pairGateway pairs a gateway of key pub to ns through l's store.
func pairGateway(tb testing.TB, l *Link, ns, pub string) gatewayRecord {
	tb.Helper()
	ctx, now := context.Background(), time.Now()
	id, code := sqldb.NewID("gps_"), newPairingCode()
	if err := l.store.createPairing(ctx, ns, id, pairingCodeHash(id, code), l.deps.Quotas, now); err != nil {
		tb.Fatal(err)
	}
	g, err := l.store.redeemPairing(ctx, pairingAttempt{SessionID: id, Code: code, KeyNamespace: ns, PublicKey: pub,
		Name: "laptop", HPKE: strings.Repeat("A", 43)}, l.deps.Quotas.Gateways, now)
	if err != nil {
		tb.Fatal(err)
	}
	return g
}

// heldGateway is the gateway's end of a socket a link holds: it answers
// every request with its method and counts them.
type heldGateway struct {
	received atomic.Int64
	closed   chan error // the reader's end
}

// holdSocket has l hold a socket of gateway g, once the gateway got its
// ready message.
func holdSocket(tb testing.TB, l *Link, g gatewayRecord) *heldGateway {
	tb.Helper()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		conn.SetReadLimit(pairwire.ReadLimit)
		l.hub.serve(r.Context(), conn, g)
	}))
	tb.Cleanup(ts.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(ts.URL, "http"), nil)
	if err != nil {
		tb.Fatal(err)
	}
	conn.SetReadLimit(pairwire.ReadLimit)
	tb.Cleanup(func() { conn.CloseNow() })
	var ready pairwire.Control
	if _, data, err := conn.Read(ctx); err != nil || json.Unmarshal(data, &ready) != nil || ready.Type != pairwire.ControlReady {
		tb.Fatalf("ready: %+v, %v", ready, err)
	}
	held := &heldGateway{closed: make(chan error, 1)}
	go func() {
		for {
			_, data, err := conn.Read(context.Background())
			if err != nil {
				held.closed <- err
				return
			}
			held.received.Add(1)
			var req rpcRequest
			json.Unmarshal(data, &req)
			b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": req.ID, "result": map[string]any{"method": req.Method, "params": req.Params}})
			conn.Write(context.Background(), websocket.MessageText, b)
		}
	}()
	return held
}
