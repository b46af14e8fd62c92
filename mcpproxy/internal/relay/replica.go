package relay

import (
	"crypto/rand"
	"fmt"
	"net/http"
	"strings"

	"github.com/idnhq/idn/apierror"
	"github.com/idnhq/idn/errcode"
)

// A 2025-era session lives in the replica that opened it. With
// Options.Replica set, its id is "<replica>.<random>", so a request that
// a load balancer sends to another replica is answered 421
// MCP_SESSION_MISDIRECTED. A 404 would tell the client to open a new
// session, silently losing the old one's state.

// maxReplicaName bounds Options.Replica, a DNS label's length.
const maxReplicaName = 63

// CheckReplica refuses a replica name that is not 1-63 lower-case
// letters, digits and inner hyphens. It must not contain the '.' that
// ends it in a session id, and must be safe to echo in an error.
func CheckReplica(name string) error {
	if name == "" {
		return nil
	}
	if !validReplica(name) {
		return fmt.Errorf("mcpproxy: Options.Replica %q must be 1-%d lower-case letters, digits and inner hyphens", name, maxReplicaName)
	}
	return nil
}

func validReplica(name string) bool {
	if name == "" || len(name) > maxReplicaName || name[0] == '-' || name[len(name)-1] == '-' {
		return false
	}
	for _, c := range []byte(name) {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
			return false
		}
	}
	return true
}

// newSessionID is a fresh session id naming this replica, if it has a
// name.
func (e *Endpoint) newSessionID() string {
	if e.replica == "" {
		return rand.Text()
	}
	return e.replica + "." + rand.Text()
}

// misdirected answers, and reports true, when this replica holds no
// session id but id names another replica, which may.
func (e *Endpoint) misdirected(w http.ResponseWriter, r *http.Request, id string) bool {
	if e.replica == "" {
		return false
	}
	name, _, ok := strings.Cut(id, ".")
	if !ok || name == e.replica || !validReplica(name) {
		return false
	}
	apierror.Write(w, r, apierror.Coded(errcode.MCPSessionMisdirected, "").With("replica", name))
	return true
}
