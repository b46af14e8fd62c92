package pairing

import (
	"context"
	"crypto/ecdh"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
	"github.com/idnhq/idn/admin"
	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/errcode"
	"github.com/idnhq/idn/identity"
	"github.com/idnhq/idn/pairing/pairwire"
)

// Errors that end Run: reconnecting cannot help.
var (
	// ErrUnpaired: the control plane does not know the gateway's key (the
	// owner unpaired it, or it never paired).
	ErrUnpaired = errors.New("pairing: this gateway is not paired; pair it again from the dashboard")
	// ErrReplaced: another process with the same identity connected.
	ErrReplaced = errors.New("pairing: another gateway process with this identity connected")
)

// RefusedError is a pairing the control plane refused.
type RefusedError struct {
	Code    errcode.Code // PairingCodeInvalid, PairingExpired, PairingEnded, ValidationError
	Message string
}

func (e *RefusedError) Error() string {
	return "pairing: refused: " + e.Code.String() + ": " + e.Message
}

// Config configures a Client.
type Config struct {
	// ControlPlaneURL is the control plane's base URL (IDN_REGISTRY_URL in
	// cmd/gateway). Required.
	ControlPlaneURL string
	// Identity signs every upgrade request: the gateway's own identity.
	// Required.
	Identity *identity.Identity
	// Admin is the gateway's admin API, whose operations the RPCs run in
	// process. Their context carries admin.OwnerContext (the RPCs are the
	// owner's), so they may change where a stored secret is sent.
	// Required.
	Admin *admin.Handler
	// Connector runs the dashboard's connect flow of OAuth accounts
	// (pairwire.MethodConnectStart and MethodConnectFinish). Nil answers
	// them "method not found": accounts connect with gateway connect only.
	Connector *admin.Connector
	// DataDir holds the HPKE key and the pairing state unless Files is
	// set. Required without Files.
	DataDir string
	// Files keeps the HPKE key and the pairing state. Nil means
	// DirFiles(DataDir). A fleet passes its shared store's, so that its
	// replicas pair once.
	Files Files
	// MasterKey seals the HPKE private key. Required.
	MasterKey credvault.MasterKey
	// Name and Version describe the gateway in the dashboard. Empty Name
	// means "gateway"; empty Version means "unknown".
	Name, Version string
	// MaxBackoff caps the wait between reconnects; zero means 30 s.
	MaxBackoff time.Duration
	// Transport carries the upgrade requests (signed on top of it). Nil
	// means http.DefaultTransport.
	Transport http.RoundTripper
	// Logger receives connection events, never secrets or RPC params. Nil
	// discards.
	Logger *slog.Logger
}

// Pairing is a pairing session to complete, as the dashboard shows it.
type Pairing struct {
	SessionID, Code string
	// Namespace is the owner's namespace the operator means to pair with;
	// a session of another namespace is refused. Empty checks nothing.
	Namespace string
}

// Client keeps a gateway connected to its owner's dashboard.
type Client struct {
	cfg    Config
	log    *slog.Logger
	key    *ecdh.PrivateKey
	opener *opener

	mu    sync.Mutex
	state State
	ok    bool
}

// New loads (or creates) the HPKE key and the pairing state of Files.
func New(cfg Config) (*Client, error) {
	switch {
	case cfg.ControlPlaneURL == "":
		return nil, errors.New("pairing: Config.ControlPlaneURL is required")
	case cfg.Identity == nil:
		return nil, errors.New("pairing: Config.Identity is required")
	case cfg.Admin == nil:
		return nil, errors.New("pairing: Config.Admin is required")
	case cfg.DataDir == "" && cfg.Files == nil:
		return nil, errors.New("pairing: Config.DataDir is required")
	}
	if cfg.MasterKey == (credvault.MasterKey{}) {
		return nil, errors.New("pairing: Config.MasterKey is required")
	}
	u, err := url.Parse(cfg.ControlPlaneURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("pairing: ControlPlaneURL %q is not an http(s) URL", cfg.ControlPlaneURL)
	}
	if cfg.Name == "" {
		cfg.Name = "gateway"
	}
	if cfg.Version == "" {
		cfg.Version = "unknown"
	}
	if cfg.Files == nil {
		cfg.Files = DirFiles(cfg.DataDir)
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = 30 * time.Second
	}
	c := &Client{cfg: cfg, log: cfg.Logger}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if c.key, err = loadOrCreateKey(cfg.Files, cfg.MasterKey); err != nil {
		return nil, err
	}
	if c.opener, err = newOpener(c.key); err != nil {
		return nil, err
	}
	if c.state, c.ok, err = loadState(cfg.Files); err != nil {
		return nil, err
	}
	return c, nil
}

// PublicKey is the raw X25519 public key secrets are sealed to.
func (c *Client) PublicKey() []byte { return c.key.PublicKey().Bytes() }

// Fingerprint is the HPKE key's fingerprint as the dashboard shows it.
func (c *Client) Fingerprint() string { return pairwire.Fingerprint(c.PublicKey()) }

// State returns the pairing state; ok is false before the first pairing.
func (c *Client) State() (s State, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.state, c.ok
}

// Status reads the pairing state and HPKE fingerprint of dataDir without
// opening the private key (no master key needed).
func Status(dataDir string) (s State, paired bool, fingerprint string, err error) {
	return StatusOf(DirFiles(dataDir))
}

// StatusOf is Status of the pairing f keeps.
func StatusOf(f Files) (s State, paired bool, fingerprint string, err error) {
	s, paired, err = loadState(f)
	if err != nil {
		return s, false, "", err
	}
	b, err := readKeyRecord(f)
	if err != nil {
		return s, paired, "", err
	}
	return s, paired, pairwire.Fingerprint(b.PublicKey), nil
}

// Run connects and serves RPCs until ctx ends (then it returns nil),
// reconnecting with exponential backoff and jitter whenever the socket
// ends. p, when not nil, is completed on the first connection unless the
// gateway is paired already. It returns ErrUnpaired, ErrReplaced or a
// *RefusedError when reconnecting cannot help; with ErrUnpaired the
// pairing state is gone from DataDir.
func (c *Client) Run(ctx context.Context, p *Pairing) error {
	if _, ok := c.State(); !ok && p == nil {
		return ErrUnpaired
	}
	failures := 0
	for {
		connected, err := c.connect(ctx, p)
		if ctx.Err() != nil {
			return nil
		}
		var refused *RefusedError
		if errors.Is(err, ErrUnpaired) {
			c.forget()
		}
		if errors.Is(err, ErrUnpaired) || errors.Is(err, ErrReplaced) || errors.As(err, &refused) {
			return err
		}
		if connected {
			failures, p = 0, nil
		}
		wait := backoff(failures, c.cfg.MaxBackoff)
		failures++
		c.log.Warn("pairing: disconnected from the control plane; reconnecting", "in", wait.Round(time.Millisecond).String(), "err", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
	}
}

// backoff is the wait after the n-th consecutive failure: 500 ms doubled
// each time up to max, with full jitter over its upper half so gateways
// that lost one control plane do not all come back at once.
func backoff(n int, max time.Duration) time.Duration {
	d := max
	if n < 16 {
		d = min(max, 500*time.Millisecond<<n)
	}
	return d/2 + rand.N(d/2+1)
}

// connect runs one connection; connected reports whether it got as far as
// "ready".
func (c *Client) connect(ctx context.Context, p *Pairing) (connected bool, err error) {
	u := "ws" + strings.TrimPrefix(strings.TrimSuffix(c.cfg.ControlPlaneURL, "/"), "http") + pairwire.Path
	if p != nil {
		u += "?" + url.Values{pairwire.PairingQuery: {p.SessionID}}.Encode()
	}
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	// A redirect is never followed (websocket.Dial would by default): the
	// signed upgrade is for ControlPlaneURL only, and a 3xx is a refused upgrade.
	conn, res, err := websocket.Dial(dctx, u, &websocket.DialOptions{
		HTTPClient: &http.Client{
			Transport:     c.cfg.Identity.Transport(c.cfg.Transport, identity.SignOptions{}),
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
	})
	cancel()
	if err != nil {
		if res != nil {
			return false, upgradeRefused(res)
		}
		return false, err
	}
	defer conn.CloseNow()
	conn.SetReadLimit(pairwire.ReadLimit)
	if p != nil {
		b, _ := json.Marshal(pairwire.Pair{SessionID: p.SessionID, PairCode: p.Code, Namespace: p.Namespace,
			Name: c.cfg.Name, Version: c.cfg.Version, HPKEPublicKey: base64.RawURLEncoding.EncodeToString(c.PublicKey())})
		if err := conn.Write(ctx, websocket.MessageText, b); err != nil {
			return false, err
		}
	}
	_, first, err := conn.Read(ctx)
	if err != nil {
		return false, closeError(err)
	}
	var ctl pairwire.Control
	if err := json.Unmarshal(first, &ctl); err != nil {
		return false, fmt.Errorf("pairing: the control plane's first message is not JSON")
	}
	switch ctl.Type {
	case pairwire.ControlError:
		code, _ := errcode.Parse(ctl.Code)
		return false, &RefusedError{Code: code, Message: ctl.Message}
	case pairwire.ControlReady:
	default:
		return false, fmt.Errorf("pairing: unexpected first message %q", ctl.Type)
	}
	if err := c.paired(ctl); err != nil {
		return false, err
	}
	c.log.Info("pairing: connected to the control plane", "gateway_id", ctl.GatewayID, "namespace", ctl.Namespace)
	return true, c.serve(ctx, conn, ctl.GatewayID)
}

// paired records the gateway id the control plane answered.
func (c *Client) paired(ctl pairwire.Control) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ok && c.state.GatewayID == ctl.GatewayID {
		if err := pinOwnerKeys(c.cfg.Files, ctl.OwnerKeys, false); err != nil {
			return err
		}
		if len(ctl.OwnerKeysUpdate) > 0 && !pinnedAlready(c.cfg.Files, ctl.OwnerKeysUpdate) {
			if _, err := updateOwnerKeys(c.cfg.Files, ctl.OwnerKeysUpdate, ctl.GatewayID, time.Now()); err != nil {
				c.log.Warn("pairing: the owner's key-set update was refused; the pinned passkeys stay", "err", err)
			}
		}
		return nil
	}
	if err := pinOwnerKeys(c.cfg.Files, ctl.OwnerKeys, true); err != nil {
		return err
	}
	c.state = State{GatewayID: ctl.GatewayID, Namespace: ctl.Namespace, ControlPlaneURL: c.cfg.ControlPlaneURL, PairedAt: time.Now().UTC()}
	c.ok = true
	return saveState(c.cfg.Files, c.state)
}

// forget drops the pairing state once the control plane no longer knows
// the gateway's key, so the gateway reads as unpaired (Status, and the
// gateway's own use of its pairing in place of service API keys).
func (c *Client) forget() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.state, c.ok = State{}, false
	if err := c.cfg.Files.WriteFile(OwnerKeysFile, nil); err != nil {
		c.log.Warn("pairing: the gateway was unpaired but its pinned owner passkeys stay", "err", err)
	}
	if err := c.cfg.Files.WriteFile(stateFile, nil); err != nil {
		c.log.Warn("pairing: the gateway was unpaired but its pairing state stays", "err", err)
	}
}

// pingInterval is how often the client checks that the control plane is
// still there, so a half-open connection is noticed.
const pingInterval = 30 * time.Second

// maxConcurrentRPC bounds the RPCs run at once; as many refusals of the
// requests past it may be being written at once, and a request past both
// is dropped (its caller times out).
const maxConcurrentRPC = 8

// serve answers RPCs until the socket ends.
func (c *Client) serve(ctx context.Context, conn *websocket.Conn, gatewayID string) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		t := time.NewTicker(pingInterval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			pctx, pcancel := context.WithTimeout(ctx, pingInterval/2)
			err := conn.Ping(pctx)
			pcancel()
			if err != nil && ctx.Err() == nil {
				conn.CloseNow()
				return
			}
		}
	}()
	// The loop never waits for a running RPC: pongs and close frames are
	// read with the messages, so a loop that stopped reading would let
	// pings time out and drop the connection under load.
	running, refusing := make(chan struct{}, maxConcurrentRPC), make(chan struct{}, maxConcurrentRPC)
	var wg sync.WaitGroup
	defer wg.Wait()
	answer := func(sem chan struct{}, f func() []byte) {
		defer func() { <-sem; wg.Done() }()
		b := f()
		wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
		defer wcancel()
		if err := conn.Write(wctx, websocket.MessageText, b); err != nil {
			c.log.Warn("pairing: answer not sent", "err", err)
		}
	}
	for {
		_, msg, err := conn.Read(ctx)
		if err != nil {
			return closeError(err)
		}
		select {
		case running <- struct{}{}:
			wg.Add(1)
			go answer(running, func() []byte { return c.handle(ctx, gatewayID, msg) })
			continue
		default:
		}
		select {
		case refusing <- struct{}{}:
			wg.Add(1)
			go answer(refusing, func() []byte { return busy(msg) })
		default:
			c.log.Warn("pairing: request dropped: the gateway is busy")
		}
	}
}

// busy is the refusal of a request that came past maxConcurrentRPC.
func busy(msg []byte) []byte {
	var probe struct {
		ID json.RawMessage `json:"id"`
	}
	json.Unmarshal(msg, &probe)
	return errorResponse(probe.ID, pairwire.CodeBusy, fmt.Sprintf("the gateway is running %d requests; retry when one is answered", maxConcurrentRPC), nil)
}

// closeError turns the socket's close status into the errors Run stops on.
func closeError(err error) error {
	switch websocket.CloseStatus(err) {
	case pairwire.CloseUnpaired:
		return ErrUnpaired
	case pairwire.CloseReplaced:
		return ErrReplaced
	}
	return err
}

// upgradeRefused reads the control plane's error envelope of a refused
// upgrade.
func upgradeRefused(res *http.Response) error {
	var env struct {
		Code  string `json:"code"`
		Error string `json:"error"`
	}
	if res.Body != nil {
		b, _ := io.ReadAll(io.LimitReader(res.Body, 64<<10))
		json.Unmarshal(b, &env)
	}
	switch code, _ := errcode.Parse(env.Code); code {
	case errcode.GatewayNotPaired:
		return ErrUnpaired
	case errcode.PairingCodeInvalid, errcode.PairingExpired, errcode.PairingEnded:
		return &RefusedError{Code: code, Message: env.Error}
	}
	return fmt.Errorf("pairing: upgrade refused: %d %s %s", res.StatusCode, env.Code, env.Error)
}
