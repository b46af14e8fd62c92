// Package egresstest provides a DNS-over-HTTPS server (RFC 8484) for tests
// of code that resolves through egress.Config.ResolverURL.
package egresstest

import (
	"encoding/binary"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
)

// DNS record types and class the server answers (RFC 1035, RFC 3596).
const (
	typeA     = 1
	typeCNAME = 5
	typeAAAA  = 28
	classIN   = 1
)

// DoHServer answers POSTed application/dns-message queries for A and AAAA
// records from its tables, following one CNAME. Other requests get 400.
type DoHServer struct {
	// URL is the server's endpoint, for egress.Config.ResolverURL.
	URL     string
	addrs   map[string][]string
	cname   map[string]string
	queries atomic.Int64
}

// NewDoHServer starts a server, stopped when t ends, that answers name's
// addresses from addrs (IPv4 in A answers, IPv6 in AAAA answers) and a
// name of cname with a CNAME to its target, then the target's addresses.
func NewDoHServer(t testing.TB, addrs map[string][]string, cname map[string]string) *DoHServer {
	d := &DoHServer{addrs: addrs, cname: cname}
	ts := httptest.NewServer(http.HandlerFunc(d.serve))
	t.Cleanup(ts.Close)
	d.URL = ts.URL
	return d
}

// Queries is how many queries the server has answered.
func (d *DoHServer) Queries() int64 { return d.queries.Load() }

func encodeName(name string) []byte {
	var b []byte
	for _, l := range strings.Split(name, ".") {
		b = append(b, byte(len(l)))
		b = append(b, l...)
	}
	return append(b, 0)
}

// queryName reads the uncompressed question name at off of a query,
// lower-cased, and returns the offset after it.
func queryName(q []byte, off int) (string, int, bool) {
	var labels []string
	for off < len(q) {
		n := int(q[off])
		if n == 0 {
			return strings.ToLower(strings.Join(labels, ".")), off + 1, true
		}
		if n&0xc0 != 0 || off+1+n > len(q) {
			return "", 0, false
		}
		labels = append(labels, string(q[off+1:off+1+n]))
		off += 1 + n
	}
	return "", 0, false
}

func (d *DoHServer) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/dns-message" {
		http.Error(w, "want RFC 8484 POST", http.StatusBadRequest)
		return
	}
	d.queries.Add(1)
	q, _ := io.ReadAll(r.Body)
	name, off, ok := queryName(q, 12)
	if !ok || off+4 > len(q) {
		http.Error(w, "bad query", http.StatusBadRequest)
		return
	}
	qtype := binary.BigEndian.Uint16(q[off:])
	question := q[12 : off+4]
	var answers []byte
	n := 0
	rr := func(owner []byte, typ uint16, data []byte) {
		answers = append(answers, owner...)
		answers = binary.BigEndian.AppendUint16(answers, typ)
		answers = binary.BigEndian.AppendUint16(answers, classIN)
		answers = binary.BigEndian.AppendUint32(answers, 60)
		answers = binary.BigEndian.AppendUint16(answers, uint16(len(data)))
		answers = append(answers, data...)
		n++
	}
	owner := []byte{0xc0, 12} // compressed pointer to the question name
	if target, ok := d.cname[name]; ok {
		rr(owner, typeCNAME, encodeName(target))
		name, owner = target, encodeName(target)
	}
	for _, s := range d.addrs[name] {
		ip := netip.MustParseAddr(s)
		if ip.Is4() && qtype == typeA {
			b := ip.As4()
			rr(owner, typeA, b[:])
		} else if ip.Is6() && qtype == typeAAAA {
			b := ip.As16()
			rr(owner, typeAAAA, b[:])
		}
	}
	msg := []byte{q[0], q[1], 0x81, 0x80, 0, 1, byte(n >> 8), byte(n), 0, 0, 0, 0}
	msg = append(append(msg, question...), answers...)
	w.Header().Set("Content-Type", "application/dns-message")
	w.Write(msg)
}
