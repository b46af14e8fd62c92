// Package didresolve builds did:idn DID documents and resolves them against
// a control plane.
//
// Documents follow W3C DID Core 1.0 with Ed25519VerificationKey2020
// verification methods. publicKeyMultibase is "z" + base58btc of the
// multicodec prefix 0xed 0x01 and the raw key. Every verification-method id
// is the agent's own keyId, "<did>#ed25519-<first 8 bytes of SHA-256 of
// the key, hex>", so ids are stable across resolutions. Resolution results
// use the DID Resolution v1 envelope (didDocument, didDocumentMetadata,
// didResolutionMetadata).
//
// Strict JSON-LD processors run in safe mode, which refuses a document with
// an undefined term. So every term a document uses is defined by one of its
// contexts: the W3C DID v1 and Ed25519 2020 contexts, and an inline context
// (Context). The inline one maps idn's own terms, such as the service type
// AgentEndpoint, to absolute IRIs under TermsIRI.
//
// Resolver is an HTTP client for the control plane's
// /1.0/identifiers/{did} endpoint with a bounded TTL cache. docs/did.md
// describes the method and its terms.
//
// Configuration follows the repository's one rule: the zero value of every
// field of Resolver is the safe one, and a required field left empty is
// refused. A protection is turned off only by a field that says so: a
// negative number, an explicit off value, or an Insecure… switch.
package didresolve

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"strings"

	"github.com/idnhq/idn/identity"
)

// JSON-LD contexts and media types of documents and resolution results.
const (
	ContextDID        = "https://www.w3.org/ns/did/v1"
	ContextEd25519    = "https://w3id.org/security/suites/ed25519-2020/v1"
	ContextResolution = "https://w3id.org/did-resolution/v1"

	MediaTypeDIDJSON    = "application/did+json"
	MediaTypeDIDLDJSON  = "application/did+ld+json"
	MediaTypeResolution = `application/ld+json;profile="https://w3id.org/did-resolution"`

	// TermsIRI is the base of the absolute IRIs of idn's own terms; it
	// names the page of the repository's documentation that defines them.
	TermsIRI = "https://github.com/idnhq/idn/blob/main/docs/did.md#"

	// KeyType is the verification-method type of agent keys.
	KeyType = "Ed25519VerificationKey2020"
	// ServiceType is the type of the service entries of a document.
	ServiceType = "AgentEndpoint"
)

// Errors returned by ParseDID, Document.PublicKey and Resolver.Resolve.
var (
	// ErrInvalidDID: the string is not did:idn:<namespace> (didResolutionMetadata error invalidDid).
	ErrInvalidDID = errors.New("didresolve: invalid DID")
	// ErrNotFound: no such namespace (notFound), or no such verification method.
	ErrNotFound = errors.New("didresolve: not found")
)

// Context returns the @context of idn DID documents: the DID v1 and
// Ed25519 2020 context URLs and an inline context defining idn's own terms.
// Those are AgentEndpoint and the fields of the owner API's form of the
// document: created, updated, deactivated, publicKeyBase64, status,
// claim_id, service_slug. Each call returns a fresh value.
func Context() []any {
	dateTime := func(iri string) map[string]any {
		return map[string]any{"@id": iri, "@type": "http://www.w3.org/2001/XMLSchema#dateTime"}
	}
	return []any{ContextDID, ContextEd25519, map[string]any{
		ServiceType:       TermsIRI + ServiceType,
		"created":         dateTime("http://purl.org/dc/terms/created"),
		"updated":         dateTime("http://purl.org/dc/terms/modified"),
		"deactivated":     TermsIRI + "deactivated",
		"publicKeyBase64": TermsIRI + "publicKeyBase64",
		"status":          TermsIRI + "claimStatus",
		"claim_id":        TermsIRI + "claimId",
		"service_slug":    TermsIRI + "serviceSlug",
	}}
}

// Document is a did:idn DID document in the W3C form.
type Document struct {
	// Context is Context() in documents this package builds; documents
	// read from elsewhere keep theirs as decoded.
	Context            []any                `json:"@context"`
	ID                 string               `json:"id"`
	VerificationMethod []VerificationMethod `json:"verificationMethod"`
	Authentication     []string             `json:"authentication"`
	AssertionMethod    []string             `json:"assertionMethod"`
	Service            []Service            `json:"service,omitempty"`
}

// VerificationMethod is one approved agent key.
type VerificationMethod struct {
	ID                 string `json:"id"`   // the agent keyId
	Type               string `json:"type"` // KeyType
	Controller         string `json:"controller"`
	PublicKeyMultibase string `json:"publicKeyMultibase"`
}

// Service is a service the namespace has approved agents for; its endpoint
// is the control plane's verify URL for the namespace and service.
type Service struct {
	ID              string `json:"id"`
	Type            string `json:"type"`
	ServiceEndpoint string `json:"serviceEndpoint"`
}

// Endpoint names a service slug and its verify URL for NewDocument.
type Endpoint struct {
	Service string
	URL     string
}

// DocumentMetadata is the didDocumentMetadata of a resolution (RFC 3339 times).
type DocumentMetadata struct {
	Created     string `json:"created,omitempty"`
	Updated     string `json:"updated,omitempty"`
	Deactivated bool   `json:"deactivated"`
}

// ResolutionMetadata is the didResolutionMetadata of a resolution.
type ResolutionMetadata struct {
	ContentType string `json:"contentType,omitempty"`
	Error       string `json:"error,omitempty"` // invalidDid, notFound, internalError
}

// Result is a DID resolution result (the envelope of /1.0/identifiers).
type Result struct {
	Context            string             `json:"@context"`
	Document           *Document          `json:"didDocument"`
	DocumentMetadata   DocumentMetadata   `json:"didDocumentMetadata"`
	ResolutionMetadata ResolutionMetadata `json:"didResolutionMetadata"`
}

// ParseDID returns the namespace of a DID naming a namespace,
// "did:idn:<namespace>". Extended DIDs (with a service part) and DID URLs
// (with a fragment) are refused with ErrInvalidDID.
func ParseDID(did string) (namespace string, err error) {
	d, err := identity.ParseDID(did)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrInvalidDID, err)
	}
	if d.Service != "" || d.Agent != "" || d.Subject != "" {
		return "", fmt.Errorf("%w: %q is not a namespace DID", ErrInvalidDID, did)
	}
	return d.Namespace, nil
}

// NewDocument builds the document of a namespace: one verification method
// per distinct key (in the given order), all of them listed under
// authentication and assertionMethod, and one AgentEndpoint service per
// endpoint. A deactivated namespace has no keys and no endpoints.
func NewDocument(namespace string, keys []ed25519.PublicKey, endpoints []Endpoint) *Document {
	did := identity.DID(namespace)
	d := &Document{
		Context:            Context(),
		ID:                 did,
		VerificationMethod: []VerificationMethod{},
		Authentication:     []string{},
		AssertionMethod:    []string{},
	}
	seen := make(map[string]bool, len(keys))
	for _, k := range keys {
		id := identity.KeyID(namespace, k)
		if seen[id] {
			continue
		}
		seen[id] = true
		d.VerificationMethod = append(d.VerificationMethod, VerificationMethod{
			ID: id, Type: KeyType, Controller: did, PublicKeyMultibase: identity.Multibase(k),
		})
		d.Authentication = append(d.Authentication, id)
		d.AssertionMethod = append(d.AssertionMethod, id)
	}
	for _, e := range endpoints {
		d.Service = append(d.Service, Service{ID: ServiceID(did, e.Service), Type: ServiceType, ServiceEndpoint: e.URL})
	}
	return d
}

// ServiceID is the DID URL of the document's service entry for the
// service slug: did + "#service-" + slug.
func ServiceID(did, slug string) string { return did + "#service-" + slug }

// PublicKey returns the key of the verification method id, given as the
// full keyId or as its fragment ("ed25519-…"). A missing method gives
// ErrNotFound.
func (d *Document) PublicKey(id string) (ed25519.PublicKey, error) {
	if strings.HasPrefix(id, "ed25519-") {
		id = d.ID + "#" + id
	}
	for _, vm := range d.VerificationMethod {
		if vm.ID == id {
			return identity.ParseMultibase(vm.PublicKeyMultibase)
		}
	}
	return nil, fmt.Errorf("%w: verification method %q", ErrNotFound, id)
}

// check verifies that a document received from elsewhere is the one of
// namespace and internally consistent: every method is an Ed25519 key whose
// id is its keyId under this DID.
func (d *Document) check(namespace string) error {
	did := identity.DID(namespace)
	if d.ID != did {
		return fmt.Errorf("didresolve: document id %q, want %q", d.ID, did)
	}
	for _, vm := range d.VerificationMethod {
		if vm.Type != KeyType || vm.Controller != did {
			return fmt.Errorf("didresolve: verification method %q: unexpected type or controller", vm.ID)
		}
		k, err := identity.ParseMultibase(vm.PublicKeyMultibase)
		if err != nil {
			return fmt.Errorf("didresolve: verification method %q: %w", vm.ID, err)
		}
		if want := identity.KeyID(namespace, k); vm.ID != want {
			return fmt.Errorf("didresolve: verification method id %q does not match its key (want %q)", vm.ID, want)
		}
	}
	return nil
}
