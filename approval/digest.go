package approval

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// Call is one agent call that a rule matched: who makes it and what it
// does. Exactly one of Tool and Method is set.
type Call struct {
	Connection string
	Service    string
	// The agent, as its verified signature names it.
	Namespace string
	PublicKey string // "ed25519:<base64>", as in the idn-agent-key header
	AgentName string
	Subject   string
	// Tool is the MCP tool's name; Arguments are its arguments (JSON).
	Tool string
	// Method, Path (escaped, after /proxy/{id}) and Query (raw) name an
	// HTTP call; Arguments are its body.
	Method, Path, Query string
	Arguments           []byte
}

// Target is what the owner reads as the call's name: "tool NAME" or
// "METHOD /path?query".
func (c *Call) Target() string {
	if c.Tool != "" {
		return "tool " + c.Tool
	}
	t := c.Method + " " + c.Path
	if c.Query != "" {
		t += "?" + c.Query
	}
	return t
}

// ErrDuplicateKey refuses JSON with a repeated object member: parsers
// disagree on which one wins, so the owner could approve one value and the
// upstream act on the other.
var ErrDuplicateKey = errors.New("approval: JSON object has a repeated member")

// Document is the canonical form of a call that the owner reads and the
// digest covers: the connection, the target and the arguments. JSON
// arguments are re-encoded with sorted members and no insignificant
// space; other bodies travel as base64.
func (c *Call) Document() ([]byte, error) {
	doc := struct {
		Connection string          `json:"connection"`
		Target     string          `json:"target"`
		Arguments  json.RawMessage `json:"arguments,omitempty"`
		BodyBase64 string          `json:"body_base64,omitempty"`
	}{Connection: c.Connection, Target: c.Target()}
	if len(bytes.TrimSpace(c.Arguments)) > 0 {
		canon, err := Canonical(c.Arguments)
		switch {
		case err == nil:
			doc.Arguments = canon
		case errors.Is(err, ErrDuplicateKey) || c.Tool != "":
			return nil, err
		default:
			doc.BodyBase64 = base64.StdEncoding.EncodeToString(c.Arguments)
		}
	}
	return marshal(doc)
}

// Canonical re-encodes a JSON value with object members sorted by name,
// numbers as written and no insignificant space. A value that is not
// JSON, or repeats a member, is an error.
func Canonical(raw []byte) ([]byte, error) {
	if err := noDuplicates(raw); err != nil {
		return nil, err
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, fmt.Errorf("approval: arguments: %w", err)
	}
	if d.More() {
		return nil, errors.New("approval: arguments: trailing data")
	}
	return marshal(v)
}

func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	if err := e.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// noDuplicates walks raw's tokens and refuses a repeated member name.
func noDuplicates(raw []byte) error {
	d := json.NewDecoder(bytes.NewReader(raw))
	type frame struct {
		object bool
		key    bool // the next token in an object is a key
		seen   map[string]bool
	}
	var stack []*frame
	for {
		t, err := d.Token()
		if err != nil {
			return nil // malformed JSON is reported by the decode that follows
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.object && top.key {
			if delim, ok := t.(json.Delim); ok && delim == '}' {
				stack = stack[:len(stack)-1]
				continue
			}
			name, _ := t.(string)
			if top.seen[name] {
				return ErrDuplicateKey
			}
			top.seen[name] = true
			top.key = false
			continue
		}
		if top != nil && top.object {
			top.key = true
		}
		switch t {
		case json.Delim('{'):
			stack = append(stack, &frame{object: true, key: true, seen: map[string]bool{}})
		case json.Delim('['):
			stack = append(stack, &frame{})
		case json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
	}
}

// Digest is the SHA-256 of a call's Document, in lower-case hex.
func Digest(document []byte) string {
	sum := sha256.Sum256(document)
	return hex.EncodeToString(sum[:])
}

// Grant is what an owner's approval says: which action, on which gateway,
// for which digest, until when, and how often.
type Grant struct {
	ActionID  string
	Gateway   string
	Digest    string
	ExpiresAt time.Time
	// Uses is how many calls the approval lets through, at least 1.
	Uses int
	// Until, when not zero, keeps the approval usable after ExpiresAt, up
	// to this time ("for M minutes"); zero means ExpiresAt.
	Until time.Time
}

// challengeLabel separates this challenge from every other use of the
// owner's passkey (sign-in, step-up), which sign random challenges.
const challengeLabel = "idn-action-approval-v1"

// Challenge is the WebAuthn challenge an approval signs: the SHA-256 of
// the label and every field of g, NUL-separated (no field holds a NUL).
func Challenge(g Grant) []byte {
	var until int64
	if !g.Until.IsZero() {
		until = g.Until.Unix()
	}
	h := sha256.New()
	for _, f := range []string{challengeLabel, g.ActionID, g.Gateway, g.Digest,
		strconv.FormatInt(g.ExpiresAt.Unix(), 10), strconv.Itoa(g.Uses), strconv.FormatInt(until, 10)} {
		h.Write([]byte(f))
		h.Write([]byte{0})
	}
	return h.Sum(nil)
}
