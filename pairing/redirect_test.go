package pairing_test

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"

	"github.com/idnhq/idn/pairing"
)

// A control plane (or whoever answers in its place) that redirects the
// upgrade gets no signed upgrade request sent to the URL it names: the
// dialer takes the 3xx as a refused upgrade and tries again later.
func TestDialerNeverFollowsARedirect(t *testing.T) {
	var mu sync.Mutex
	var leaked []string
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		leaked = append(leaked, r.Method+" "+r.URL.String()+" signature="+r.Header.Get("Signature"))
		mu.Unlock()
	}))
	defer collector.Close()
	for _, code := range []int{301, 302, 303, 307, 308} {
		t.Run("control plane answers "+strconv.Itoa(code), func(t *testing.T) {
			answered := make(chan struct{}, 2)
			hostile := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, collector.URL+r.URL.RequestURI(), code)
				select {
				case answered <- struct{}{}:
				default:
				}
			}))
			defer hostile.Close()
			g := newLocalGateway(t, hostile.URL)
			g.run(&pairing.Pairing{SessionID: "gps_x", Code: "ABCDEFGH"})
			// The second attempt begins once the first, with any hop it
			// followed, is over.
			<-answered
			<-answered
			g.cancel()
			if err := <-g.done; err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
	mu.Lock()
	defer mu.Unlock()
	if len(leaked) != 0 {
		t.Errorf("the redirect target received %q", leaked)
	}
}
