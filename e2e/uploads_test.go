package e2e

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/identity"
)

// procStatus reads a field of /proc/<pid>/status in kB, as bytes.
func procStatus(t *testing.T, pid int, field string) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// upload is one attacking connection: a request head, a body of which it
// sends the first part bytes, and the status it was answered with.
type upload struct {
	head   []byte
	body   []byte
	part   int
	status int
	err    error
}

// run dials, waits for go, sends the head and part of the body and reads
// the answer. A gateway that waited for the whole body would never answer
// a sender that stops, so the read has a deadline.
func (u *upload) run(addr string, dialed *sync.WaitGroup, start <-chan struct{}) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	dialed.Done()
	if err != nil {
		u.err = err
		return
	}
	defer c.Close()
	<-start
	go func() {
		// The gateway answers and closes without reading: the writes
		// then fail, which is the point.
		if _, err := c.Write(u.head); err == nil {
			_, _ = c.Write(u.body[:u.part])
		}
	}()
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		u.err = err
		return
	}
	resp.Body.Close()
	u.status = resp.StatusCode
}

// TestUnauthenticatedUploadsStayOutOfMemory runs the built gateway binary
// and sends it 200 concurrent 8 MiB uploads from callers it must not
// admit: 100 slow senders that send the head and 1 MiB and then stop,
// 50 full bodies under a forged signature and 50 full bodies validly
// signed by an agent of a namespace no owner registered. The gateway
// answers every one from the headers (403 for the forgery, 404
// NAMESPACE_NOT_FOUND for the stranger), and the peak resident memory of its process
// (VmHWM, reset before the attack) rises by less than 64 MB.
func TestUnauthenticatedUploadsStayOutOfMemory(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("needs /proc to read a process's resident memory")
	}
	const (
		bodySize  = 8<<20 - 1
		slowPart  = 1 << 20
		slow      = 100
		forged    = 50
		unclaimed = 50
		bound     = 64 << 20
	)
	bin, err := buildGateway()
	if err != nil {
		t.Fatal(err)
	}
	w := newWorld(t)
	upstream := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		io.WriteString(rw, "ok")
	}))
	defer upstream.Close()
	key, err := credvault.GenerateMasterKey()
	if err != nil {
		t.Fatal(err)
	}
	p := &gatewayProcess{bin: bin, addr: freeAddr(t)}
	p.env = append(os.Environ(), "GATEWAY_ADDR="+p.addr, "GATEWAY_DATA_DIR="+t.TempDir(), "GATEWAY_MASTER_KEY="+key.Encode(),
		"GATEWAY_ADMIN_ACCESS_MODE=loopback", "IDN_REGISTRY_URL="+w.cp.url(), "IDN_SERVICE_API_KEY="+w.apiKey,
		"GATEWAY_CLAIMS_CACHE_TTL_SECONDS=30", "GATEWAY_CLAIMS_CACHE_REFRESH_SECONDS=10")
	if _, err := p.cli("add", "--id", "github", "--base-url", upstream.URL, "--auth-mode", "bearer", "--secret", "token=upload-secret"); err != nil {
		t.Fatal(err)
	}
	p.start(t)
	defer p.kill()
	base := "http://" + p.addr
	client := &http.Client{Timeout: 10 * time.Second}
	signedPost := func(id *identity.Identity, body []byte) *http.Request {
		req, _ := http.NewRequest("POST", base+"/proxy/github/upload", bytes.NewReader(body))
		if err := id.Sign(req, identity.SignOptions{}); err != nil {
			t.Fatal(err)
		}
		return req
	}
	eventually(t, 15*time.Second, "the gateway to serve", func() bool {
		a, err := do(client, signedPost(w.agent, []byte("warm-up")))
		return err == nil && a.status == 200
	})

	body := bytes.Repeat([]byte("attack!!"), bodySize/8+1)[:bodySize]
	stranger, err := identity.New("mallory")
	if err != nil {
		t.Fatal(err)
	}
	head := func(req *http.Request) []byte {
		var b bytes.Buffer
		fmt.Fprintf(&b, "POST /proxy/github/upload HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n", p.addr, bodySize)
		for name, vals := range req.Header {
			for _, v := range vals {
				fmt.Fprintf(&b, "%s: %s\r\n", name, v)
			}
		}
		b.WriteString("\r\n")
		return b.Bytes()
	}
	forgedReq := signedPost(w.agent, body)
	forgedReq.Header.Set("Signature", "sig1=:"+strings.Repeat("A", 86)+"==:")
	forgedHead, unclaimedHead := head(forgedReq), head(signedPost(stranger, body))
	// Warm the refusal paths too, so what is measured is the attack.
	want := map[*upload]int{}
	refusal := func(h []byte) int {
		if bytes.Equal(h, unclaimedHead) {
			return 404
		}
		return 403
	}
	for _, h := range [][]byte{forgedHead, unclaimedHead} {
		u := &upload{head: h, body: body, part: 1}
		var dialed sync.WaitGroup
		dialed.Add(1)
		start := make(chan struct{})
		close(start)
		u.run(p.addr, &dialed, start)
		if u.status != refusal(h) {
			t.Fatalf("warm-up refusal: %d %v", u.status, u.err)
		}
	}

	pid := p.cmd.Process.Pid
	before := procStatus(t, pid, "VmRSS")
	// Writing 5 to clear_refs resets the peak resident size to the current
	// one, so VmHWM afterwards is the peak of the attack alone.
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0); err != nil {
		t.Logf("cannot reset VmHWM (%v); the peak below includes start-up", err)
	}

	var uploads []*upload
	for i := range slow + forged + unclaimed {
		u := &upload{head: forgedHead, body: body, part: bodySize}
		switch {
		case i < slow:
			u.part = slowPart
		case i >= slow+forged:
			u.head = unclaimedHead
		}
		uploads = append(uploads, u)
		want[u] = refusal(u.head)
	}
	var dialed, done sync.WaitGroup
	start := make(chan struct{})
	for _, u := range uploads {
		dialed.Add(1)
		done.Go(func() { u.run(p.addr, &dialed, start) })
	}
	dialed.Wait()
	close(start)
	done.Wait()

	peak := procStatus(t, pid, "VmHWM")
	statuses, wrong := map[string]int{}, 0
	for _, u := range uploads {
		if u.status != want[u] {
			wrong++
		}
		if u.err != nil {
			statuses["no answer"]++
		} else {
			statuses[strconv.Itoa(u.status)]++
		}
	}
	rise := peak - before
	t.Logf("%d concurrent unauthenticated %d-byte uploads: gateway RSS %.1f MB before, peak %.1f MB, rise %.1f MB (bound %d MB); answers %v",
		len(uploads), bodySize, mb(before), mb(peak), mb(rise), bound>>20, statuses)
	if wrong > 0 {
		t.Errorf("answers %v: %d of %d not the refusal of their headers", statuses, wrong, len(uploads))
	}
	if rise >= bound {
		t.Errorf("peak RSS rose by %.1f MB, want < %d MB", mb(rise), bound>>20)
	}
	if a, err := do(client, signedPost(w.agent, []byte("after"))); err != nil || a.status != 200 {
		t.Fatalf("approved agent after the attack: %+v %v", a, err)
	}
}

func mb(b int64) float64 { return float64(b) / 1e6 }
