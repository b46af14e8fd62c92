package egress

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"
)

// DNS record types and class used by the resolver (RFC 1035, RFC 3596).
const (
	dnsTypeA     = 1
	dnsTypeCNAME = 5
	dnsTypeAAAA  = 28
	dnsClassIN   = 1
)

// dohResolver resolves host names with DNS over HTTPS (RFC 8484, the
// application/dns-message wire format, POST). It asks for A and AAAA
// records and follows CNAME chains inside the answer section.
type dohResolver struct {
	endpoint string
	client   *http.Client
}

func newDoHResolver(endpoint string, timeout time.Duration) (*dohResolver, error) {
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil {
		return nil, errors.New("egress: DNS resolver URL must be an absolute http(s) URL without credentials")
	}
	return &dohResolver{endpoint: endpoint, client: &http.Client{Timeout: timeout}}, nil
}

// lookup returns the IPv4 and IPv6 addresses of host.
func (r *dohResolver) lookup(ctx context.Context, host string) ([]netip.Addr, error) {
	name := strings.TrimSuffix(host, ".")
	if name == "" || len(name) > 253 {
		return nil, fmt.Errorf("%w: %q: invalid name", ErrResolve, host)
	}
	var out []netip.Addr
	var firstErr error
	for _, t := range []uint16{dnsTypeA, dnsTypeAAAA} {
		ips, err := r.query(ctx, name, t)
		if err != nil && firstErr == nil {
			firstErr = err
		}
		out = append(out, ips...)
	}
	if len(out) == 0 {
		if firstErr == nil {
			firstErr = errors.New("no A or AAAA records")
		}
		return nil, fmt.Errorf("%w: %q over DoH: %v", ErrResolve, name, firstErr)
	}
	return out, nil
}

func (r *dohResolver) query(ctx context.Context, name string, qtype uint16) ([]netip.Addr, error) {
	msg, err := dnsQuery(name, qtype)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.endpoint, bytes.NewReader(msg))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/dns-message")
	req.Header.Set("Accept", "application/dns-message")
	res, err := r.client.Do(req)
	if err != nil {
		return nil, errors.New("DoH request failed") // the error text would repeat the resolver URL
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("DoH server answered %d", res.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(res.Body, 65536))
	if err != nil {
		return nil, errors.New("DoH answer unreadable")
	}
	return parseDNSAnswer(body, name, qtype)
}

// dnsQuery builds a recursive query for name and qtype with ID 0, as
// RFC 8484 §4.1 recommends for cache friendliness.
func dnsQuery(name string, qtype uint16) ([]byte, error) {
	msg := []byte{0, 0, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0} // RD set, one question
	for _, label := range strings.Split(name, ".") {
		if label == "" || len(label) > 63 {
			return nil, fmt.Errorf("egress: resolve %q: invalid name", name)
		}
		msg = append(msg, byte(len(label)))
		msg = append(msg, label...)
	}
	msg = append(msg, 0)
	msg = binary.BigEndian.AppendUint16(msg, qtype)
	msg = binary.BigEndian.AppendUint16(msg, dnsClassIN)
	return msg, nil
}

var errDNSMalformed = errors.New("malformed DNS message")

// parseDNSAnswer reads a DNS response (RFC 1035 §4) and returns the
// addresses of type qtype owned by name or by the CNAME chain starting at
// name. Records owned by other names are ignored.
func parseDNSAnswer(msg []byte, name string, qtype uint16) ([]netip.Addr, error) {
	if len(msg) < 12 {
		return nil, errDNSMalformed
	}
	flags := binary.BigEndian.Uint16(msg[2:])
	if flags&0x8000 == 0 {
		return nil, errors.New("DNS message is not a response")
	}
	if rcode := flags & 0xf; rcode != 0 {
		return nil, fmt.Errorf("DNS error code %d", rcode)
	}
	qd, an := int(binary.BigEndian.Uint16(msg[4:])), int(binary.BigEndian.Uint16(msg[6:]))
	off := 12
	for i := 0; i < qd; i++ {
		_, next, err := readDNSName(msg, off)
		if err != nil || next+4 > len(msg) {
			return nil, errDNSMalformed
		}
		off = next + 4
	}
	type rr struct {
		owner, target string
		typ           uint16
		data          []byte
	}
	records := make([]rr, 0, an)
	for i := 0; i < an; i++ {
		owner, next, err := readDNSName(msg, off)
		if err != nil || next+10 > len(msg) {
			return nil, errDNSMalformed
		}
		typ, class := binary.BigEndian.Uint16(msg[next:]), binary.BigEndian.Uint16(msg[next+2:])
		rdlen := int(binary.BigEndian.Uint16(msg[next+8:]))
		start := next + 10
		if start+rdlen > len(msg) {
			return nil, errDNSMalformed
		}
		rec := rr{owner: owner, typ: typ, data: msg[start : start+rdlen]}
		if typ == dnsTypeCNAME && class == dnsClassIN {
			target, end, err := readDNSName(msg, start)
			if err != nil || end != start+rdlen {
				return nil, errDNSMalformed
			}
			rec.target = target
		}
		if class == dnsClassIN {
			records = append(records, rec)
		}
		off = start + rdlen
	}
	// Follow the CNAME chain from name (bounded, so a loop ends).
	want := strings.ToLower(strings.TrimSuffix(name, "."))
	for hops := 0; hops < 8; hops++ {
		moved := false
		for _, r := range records {
			if r.typ == dnsTypeCNAME && r.owner == want {
				want, moved = r.target, true
				break
			}
		}
		if !moved {
			break
		}
	}
	var out []netip.Addr
	for _, r := range records {
		if r.owner != want || r.typ != qtype {
			continue
		}
		if ip, ok := netip.AddrFromSlice(r.data); ok && (qtype == dnsTypeA && len(r.data) == 4 || qtype == dnsTypeAAAA && len(r.data) == 16) {
			out = append(out, ip)
		}
	}
	return out, nil
}

// readDNSName decodes the possibly compressed name at off, lower-cased and
// without the trailing dot, and returns the offset after it in the message
// (after the first pointer when compressed).
func readDNSName(msg []byte, off int) (string, int, error) {
	var b strings.Builder
	end := -1
	for jumps := 0; ; {
		if off >= len(msg) {
			return "", 0, errDNSMalformed
		}
		n := int(msg[off])
		switch {
		case n == 0:
			if end < 0 {
				end = off + 1
			}
			return strings.ToLower(b.String()), end, nil
		case n&0xc0 == 0xc0:
			if off+1 >= len(msg) || jumps > 16 {
				return "", 0, errDNSMalformed
			}
			if end < 0 {
				end = off + 2
			}
			off = int(binary.BigEndian.Uint16(msg[off:]) & 0x3fff)
			jumps++
		case n&0xc0 != 0:
			return "", 0, errDNSMalformed
		default:
			if off+1+n > len(msg) || b.Len()+n+1 > 255 {
				return "", 0, errDNSMalformed
			}
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.Write(msg[off+1 : off+1+n])
			off += 1 + n
		}
	}
}
