// Temporary: pins every chosen dependency in go.mod/go.sum while packages are
// written in parallel. Removed (then go mod tidy) once each is imported for real.

package idn

import (
	_ "github.com/descope/virtualwebauthn"
	_ "github.com/dunglas/httpsfv"
	_ "github.com/go-webauthn/webauthn/webauthn"
	_ "github.com/golang-jwt/jwt/v5"
	_ "github.com/google/go-cmp/cmp"
	_ "github.com/jackc/pgx/v5"
	_ "github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/jackc/pgx/v5/stdlib"
	_ "github.com/modelcontextprotocol/go-sdk/jsonrpc"
	_ "github.com/modelcontextprotocol/go-sdk/mcp"
	_ "github.com/multiformats/go-multibase"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/prometheus/client_golang/prometheus/promhttp"
	_ "github.com/prometheus/client_golang/prometheus/testutil"
	_ "golang.org/x/crypto/hkdf"
	_ "golang.org/x/time/rate"
	_ "modernc.org/sqlite"
)
