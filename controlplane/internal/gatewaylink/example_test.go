package gatewaylink_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/idnhq/idn/apierror"
	"github.com/idnhq/idn/controlplane/internal/gatewaylink"
	"github.com/idnhq/idn/controlplane/internal/sqldb"
	"github.com/idnhq/idn/controlplane/internal/web"
	"github.com/idnhq/idn/identity"
	"github.com/idnhq/idn/replay"
)

// The control plane composes a link from its database, its web kit, its
// owner sessions (an X-Owner header stands in for them here) and its
// signed-request admission. An owner starts a pairing session; a key that
// is neither paired nor names a session is refused before its nonce is
// recorded, so a stranger's upgrade writes nothing.
func Example() {
	dir, _ := os.MkdirTemp("", "gatewaylink")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	db, err := sqldb.Open(ctx, sqldb.Config{SQLitePath: filepath.Join(dir, "cp.db")})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer db.Close()
	now := sqldb.Micros(time.Now())
	db.Exec(ctx, `INSERT INTO accounts (id, created_at) VALUES ('acc_alice', $1)`, now)
	db.Exec(ctx, `INSERT INTO namespaces (namespace, owner_id, created_at, updated_at) VALUES ('alice', 'acc_alice', $1, $1)`, now)

	kit := &web.Kit{Log: slog.New(slog.DiscardHandler), Clock: time.Now, MaxBodyBytes: 1 << 20}
	verifier := &identity.Verifier{InsecureSkipNonceCheck: true, InsecureSkipBodyCheck: true}
	nonces, _ := replay.New(replay.Config{})
	var recorded atomic.Int64
	link, err := gatewaylink.New(gatewaylink.Config{}, gatewaylink.Deps{
		DB:  db,
		Kit: kit,
		Owner: func(next web.OwnerHandler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { next(w, r, r.Header.Get("X-Owner")) })
		},
		Signed: gatewaylink.Signed{
			Verify: func(w http.ResponseWriter, r *http.Request) (*identity.Caller, bool) {
				caller, err := verifier.Verify(r)
				if err != nil {
					apierror.Write(w, r, web.ErrUnauthenticated)
				}
				return caller, err == nil
			},
			RecordNonce: func(w http.ResponseWriter, r *http.Request, c *identity.Caller) bool {
				recorded.Add(1)
				if err := nonces.CheckNonce(r.Context(), c.Namespace, c.Nonce, c.NonceUntil); err != nil {
					kit.Error(w, r, err)
					return false
				}
				return true
			},
		},
		Quotas: gatewaylink.Quotas{OpenPairings: 5, Gateways: 25},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer link.Close()
	mux := http.NewServeMux()
	link.Routes(mux)
	ts := httptest.NewServer(mux)
	defer ts.Close()

	req, _ := http.NewRequest("POST", ts.URL+"/v1/gateways/pairings", nil)
	req.Header.Set("X-Owner", "alice")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	var session struct {
		PairCode string `json:"pair_code"`
	}
	json.NewDecoder(res.Body).Decode(&session)
	res.Body.Close()
	fmt.Println("pairing session:", res.StatusCode, len(session.PairCode), "characters")

	stranger, _ := identity.New("stranger")
	req, _ = http.NewRequest("GET", ts.URL+"/v1/gateways/connect", nil)
	stranger.Sign(req, identity.SignOptions{})
	res, err = http.DefaultClient.Do(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	var refusal struct{ Code string }
	json.NewDecoder(res.Body).Decode(&refusal)
	res.Body.Close()
	fmt.Println("stranger's upgrade:", res.StatusCode, refusal.Code, "with", recorded.Load(), "nonces recorded")
	// Output:
	// pairing session: 201 8 characters
	// stranger's upgrade: 403 GATEWAY_NOT_PAIRED with 0 nonces recorded
}
