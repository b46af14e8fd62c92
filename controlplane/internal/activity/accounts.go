package activity

import (
	"context"
	"time"

	"github.com/idnhq/idn/controlplane/internal/sqldb"
)

// An OAuth account whose refresh token the provider refused is told to
// its owner once (Deps.ReconnectRequired), and again only after it served
// a call since: table account_alerts holds the accounts told.

// accountKey is an OAuth account of a gateway's connection.
type accountKey struct{ connection, account string }

// accountState is the last word of a batch on an account: it served a
// call, or a call was refused because it needs reconnecting.
type accountState struct {
	refused bool
	service string
	at      time.Time
}

// tellAccounts records what a batch of gatewayID said of its accounts and
// tells the owner of each newly refused one. Failures are logged: the
// records are stored already.
func (a *Activity) tellAccounts(ctx context.Context, ns, gatewayID string, accounts map[accountKey]accountState) {
	for k, st := range accounts {
		if !st.refused {
			_, err := a.store.db.Exec(ctx, `DELETE FROM account_alerts WHERE namespace = $1 AND gateway_id = $2 AND connection_id = $3 AND account = $4`,
				ns, gatewayID, k.connection, k.account)
			if err != nil {
				a.kit.Log.ErrorContext(ctx, "activity: account alert not cleared", "err", err)
			}
			continue
		}
		res, err := a.store.db.Exec(ctx, `INSERT INTO account_alerts (namespace, gateway_id, connection_id, account, alerted_at)
			VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING`, ns, gatewayID, k.connection, k.account, sqldb.Micros(st.at))
		if err != nil {
			a.kit.Log.ErrorContext(ctx, "activity: account alert not recorded", "err", err)
			continue
		}
		if n, _ := res.RowsAffected(); n != 1 || a.deps.ReconnectRequired == nil {
			continue
		}
		if err := a.deps.ReconnectRequired(ctx, ns, st.service, gatewayID, k.connection, k.account, st.at); err != nil {
			a.kit.Log.ErrorContext(ctx, "activity: reconnect alert not queued", "err", err)
		}
	}
}
