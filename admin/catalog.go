package admin

import (
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"

	"github.com/idnhq/idn/apierror"
	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/errcode"
	"github.com/idnhq/idn/identity/display"
)

// CatalogSchemaVersion is the only catalog schema_version accepted.
const CatalogSchemaVersion = 1

const maxCatalogServices = 500

//go:embed default-catalog.json
var defaultCatalogJSON []byte

// Catalog is the service catalog document: templates for quick connection
// set-up in the dashboard.
type Catalog struct {
	SchemaVersion int              `json:"schema_version"`
	Services      []CatalogService `json:"services"`
}

// CatalogService is one template. Its fields mean what the connection
// fields of the same name mean; EnvVar is a hint the dashboard uses to
// suggest a shared credential variable (the gateway never reads the
// environment for it).
type CatalogService struct {
	ID             string `json:"id"`
	Name           string `json:"name"`
	Description    string `json:"description,omitempty"`
	Protocol       string `json:"protocol,omitempty"`
	BaseURL        string `json:"base_url"`
	PathPrefix     string `json:"path_prefix,omitempty"`
	AuthMode       string `json:"auth_mode,omitempty"`
	AuthPrefix     string `json:"auth_prefix,omitempty"`
	AuthHeaderName string `json:"auth_header_name,omitempty"`
	AuthQueryParam string `json:"auth_query_param,omitempty"`
	AuthSecretKey  string `json:"auth_secret_key,omitempty"`
	MCPEndpoint    string `json:"mcp_endpoint,omitempty"`
	EnvVar         string `json:"env_var,omitempty"`
	DocsURL        string `json:"docs_url,omitempty"`
}

// validate checks the document with the same rules as connections (check
// is the vault's ValidateConnection).
func (c *Catalog) validate(check func(*credvault.Connection, map[string]string) error) error {
	if c.SchemaVersion != CatalogSchemaVersion {
		return badRequest(fmt.Sprintf("schema_version must be %d", CatalogSchemaVersion)).With("field", "schema_version")
	}
	if c.Services == nil {
		return badRequest("services must be an array").With("field", "services")
	}
	if len(c.Services) > maxCatalogServices {
		return badRequest(fmt.Sprintf("services has more than %d entries", maxCatalogServices)).With("field", "services")
	}
	seen := map[string]bool{}
	for i, s := range c.Services {
		field := fmt.Sprintf("services[%d]", i)
		if seen[s.ID] {
			return badRequest(field+": duplicate id").With("field", field+".id")
		}
		seen[s.ID] = true
		if s.Name == "" || len(s.Name) > 200 || len(s.Description) > 2000 {
			return badRequest(field+": name must be 1-200 bytes and description at most 2000").With("field", field+".name")
		}
		if err := display.Check(s.Name); err != nil {
			return badRequest(field+": name "+err.Error()).With("field", field+".name")
		}
		conn := &credvault.Connection{
			ID: s.ID, Protocol: s.Protocol, BaseURL: s.BaseURL, PathPrefix: s.PathPrefix,
			AuthMode: s.AuthMode, AuthPrefix: s.AuthPrefix, AuthHeaderName: s.AuthHeaderName,
			AuthQueryParam: s.AuthQueryParam, AuthSecretKey: s.AuthSecretKey,
		}
		if s.MCPEndpoint != "" {
			endpoint, _ := json.Marshal(s.MCPEndpoint)
			conn.Extensions = map[string]json.RawMessage{"mcp_endpoint": endpoint}
		}
		secrets := map[string]string{}
		if s.AuthMode != "" && conn.AuthSecretKey == "" {
			conn.AuthSecretKey = "api_key"
		}
		if conn.AuthSecretKey != "" {
			secrets[conn.AuthSecretKey] = "placeholder"
		}
		if err := check(conn, secrets); err != nil {
			var ve *credvault.ValidationError
			if errors.As(err, &ve) {
				return badRequest(field+": "+ve.Field+": "+ve.Message).With("field", field+"."+ve.Field)
			}
			return err
		}
		if s.EnvVar != "" {
			if credvault.ValidateVariableKey(s.EnvVar) != nil {
				return badRequest(field+": env_var must be a variable name such as GITHUB_TOKEN").With("field", field+".env_var")
			}
		}
		if s.DocsURL != "" {
			if u, err := url.Parse(s.DocsURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
				return badRequest(field+": docs_url must be an http(s) URL").With("field", field+".docs_url")
			}
		}
	}
	return nil
}

var errNoCatalog = apierror.Coded(errcode.NotFound, "the service catalog is not configured")

func (h *Handler) getCatalog(w http.ResponseWriter, r *http.Request) {
	if h.cfg.CatalogFile == "" {
		apierror.Write(w, r, errNoCatalog)
		return
	}
	h.catalogMu.Lock()
	defer h.catalogMu.Unlock()
	raw, err := os.ReadFile(h.cfg.CatalogFile)
	if errors.Is(err, fs.ErrNotExist) {
		raw = defaultCatalogJSON
		if err = writeFileAtomic(h.cfg.CatalogFile, raw); err == nil {
			h.log.Info("admin: wrote default service catalog", "file", h.cfg.CatalogFile)
		}
	}
	if err != nil {
		writeError(w, r, h.log, fmt.Errorf("admin: service catalog: %w", err))
		return
	}
	var cat Catalog
	if err := json.Unmarshal(raw, &cat); err != nil {
		writeError(w, r, h.log, fmt.Errorf("admin: service catalog file %s is not valid JSON: %w", h.cfg.CatalogFile, err))
		return
	}
	apierror.WriteJSON(w, http.StatusOK, &cat)
}

func (h *Handler) putCatalog(w http.ResponseWriter, r *http.Request) {
	if h.cfg.CatalogFile == "" {
		apierror.Write(w, r, errNoCatalog)
		return
	}
	body, err := h.readBody(w, r)
	if err != nil {
		writeError(w, r, h.log, err)
		return
	}
	cat, err := decodeCatalog(body, h.cfg.Vault.ValidateConnection)
	if err != nil {
		writeError(w, r, h.log, err)
		return
	}
	out, err := json.MarshalIndent(cat, "", "  ")
	if err != nil {
		writeError(w, r, h.log, err)
		return
	}
	h.catalogMu.Lock()
	err = writeFileAtomic(h.cfg.CatalogFile, append(out, '\n'))
	h.catalogMu.Unlock()
	if err != nil {
		writeError(w, r, h.log, fmt.Errorf("admin: writing service catalog: %w", err))
		return
	}
	h.log.Info("admin: service catalog replaced", "services", len(cat.Services), "request_id", apierror.RequestIDFrom(r.Context()))
	apierror.WriteJSON(w, http.StatusOK, cat)
}

// decodeCatalog parses and validates a catalog document from untrusted
// input, its services checked as connections by check.
func decodeCatalog(body []byte, check func(*credvault.Connection, map[string]string) error) (*Catalog, error) {
	var cat Catalog
	if err := decodeStrict(body, &cat); err != nil {
		return nil, err
	}
	if err := cat.validate(check); err != nil {
		return nil, err
	}
	return &cat, nil
}

// writeFileAtomic writes data to a temporary file in the same directory,
// syncs it and renames it over path (mode 0600), so readers see the old or
// the new file, never a partial one.
func writeFileAtomic(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp, 0o600)
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
	}
	return err
}
