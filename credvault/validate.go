package credvault

import (
	"errors"
	"fmt"
	"maps"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/idnhq/idn/approval"
	"github.com/idnhq/idn/identity/display"
)

// ValidationError says which field of a request is wrong and why. Its
// message never contains a secret value.
type ValidationError struct {
	Field   string // JSON name of the field, e.g. "base_url"
	Message string
}

func (e *ValidationError) Error() string {
	return "credvault: invalid " + e.Field + ": " + e.Message
}

func invalid(field, format string, args ...any) error {
	return &ValidationError{Field: field, Message: fmt.Sprintf(format, args...)}
}

var (
	connectionIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$`)
	variableKeyPattern  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)
	secretNamePattern   = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`)
	headerNamePattern   = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}$")
	serviceSlugPattern  = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`)
)

// authModes lists the auth modes for error messages.
var authModes = fmt.Sprintf("%q, %q, %q, %q or %q", AuthBearer, AuthHeaderKey, AuthQueryParam, AuthOAuth2ClientCredentials, AuthOAuth2AuthorizationCode)

// MinSecretLen is the shortest secret accepted. Every form of a
// connection's credential is replaced by "[redacted]" in what its upstream
// returns; a shorter value also occurs by chance in ordinary text (a
// one-letter secret in every word holding that letter), and replacing it
// there would corrupt responses and tool catalogues.
const MinSecretLen = 8

// Size limits of configuration fields.
const (
	maxNameLen      = 200
	maxSecretLen    = 16 << 10
	maxSecrets      = 64
	maxSubjectLen   = 256
	maxURLLen       = 2048
	maxRotationDays = 3650
	maxReasonLen    = 200
	maxPrefixLen    = 256
)

// ValidateConnectionID checks a connection id against
// ^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$.
func ValidateConnectionID(id string) error {
	if !connectionIDPattern.MatchString(id) {
		return invalid("id", "must be 1-64 letters, digits, '-' or '_', starting with a letter or digit")
	}
	return nil
}

// ValidateVariableKey checks a credential variable key: a letter or '_'
// followed by up to 127 letters, digits or '_' (upper case recommended).
func ValidateVariableKey(key string) error {
	if !variableKeyPattern.MatchString(key) {
		return invalid("key", "must be a letter or '_' followed by up to 127 letters, digits or '_'")
	}
	return nil
}

// ValidateBaseURL checks an upstream base URL: absolute http or https, with
// a host, without user information or fragment.
func ValidateBaseURL(raw string) error {
	return ValidateUpstreamURL("base_url", raw)
}

// ValidateUpstreamURL checks raw, the URL of configuration field field, as
// ValidateBaseURL checks a base URL (the gateway checks an MCP connection's
// absolute endpoint with it).
func ValidateUpstreamURL(field, raw string) error {
	if raw == "" {
		return invalid(field, "is required")
	}
	if len(raw) > maxURLLen {
		return invalid(field, "is longer than %d bytes", maxURLLen)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return invalid(field, "is not a URL")
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return invalid(field, "must use http or https")
	case u.Host == "" || u.Hostname() == "":
		return invalid(field, "must name a host")
	case u.User != nil:
		return invalid(field, "must not contain user information; store credentials as secrets")
	case u.Fragment != "" || strings.Contains(raw, "#"):
		return invalid(field, "must not contain a fragment")
	case u.Opaque != "":
		return invalid(field, "must be hierarchical (scheme://host/path)")
	}
	return nil
}

// ValidateConnection checks a connection's configuration (the fields from ID
// to Extensions) together with the names and values of its secrets, as
// Create would. The connection is checked as it will be stored, after
// defaults are applied. Secret values may contain {{KEY}} references; their
// syntax is checked, not whether the variables exist. The error is a
// *ValidationError or Config.Extensions.Check's.
func (v *Vault) ValidateConnection(c *Connection, secrets map[string]string) error {
	if err := v.completeConfig(configOnly(c), sortedKeys(secrets)); err != nil {
		return err
	}
	return validateSecrets(secrets)
}

// validateConfig checks the configuration fields given the names of the
// connection's secrets, the fields shown to the owner included.
func (c *Connection) validateConfig(secretNames []string) error {
	if err := c.validateShown(); err != nil {
		return err
	}
	return c.validateSettings(secretNames)
}

// validateShown checks the fields the dashboard shows the owner with the
// rule of package display: no U+202E or other character that hides or
// reorders text. Rotate does not call it, so that a name stored before the
// rule never stands in the way of replacing a leaked secret.
func (c *Connection) validateShown() error {
	for _, f := range []struct{ field, v string }{{"name", c.Name}, {"base_url", c.BaseURL}} {
		if err := display.Check(f.v); err != nil {
			return invalid(f.field, "%v", err)
		}
	}
	return nil
}

// validateSettings checks the configuration fields but those validateShown
// checks, given the names of the connection's secrets.
func (c *Connection) validateSettings(secretNames []string) error {
	if err := ValidateConnectionID(c.ID); err != nil {
		return err
	}
	if len(c.Name) > maxNameLen {
		return invalid("name", "is longer than %d bytes", maxNameLen)
	}
	if c.Service != "" && !serviceSlugPattern.MatchString(c.Service) {
		return invalid("service", "must be 1-128 letters, digits, '.', '-' or '_'")
	}
	switch c.Protocol {
	case ProtocolHTTP, ProtocolMCP:
	default:
		return invalid("protocol", "must be %q or %q", ProtocolHTTP, ProtocolMCP)
	}
	if err := ValidateBaseURL(c.BaseURL); err != nil {
		return err
	}
	if c.PathPrefix != "" {
		if len(c.PathPrefix) > maxURLLen || !strings.HasPrefix(c.PathPrefix, "/") ||
			strings.ContainsAny(c.PathPrefix, "?#\\") || hasDotSegment(c.PathPrefix) || hasControl(c.PathPrefix) {
			return invalid("path_prefix", "must be an absolute path starting with '/', without '?', '#', '\\' or dot segments")
		}
	}
	switch c.AuthMode {
	case AuthBearer, AuthHeaderKey, AuthQueryParam, AuthOAuth2ClientCredentials, AuthOAuth2AuthorizationCode:
	case "":
		if c.Protocol == ProtocolHTTP || c.AuthSecretKey != "" {
			return invalid("auth_mode", "is required; use %s", authModes)
		}
	default:
		return invalid("auth_mode", "must be %s", authModes)
	}
	if err := c.validateOAuth(); err != nil {
		return err
	}
	if len(c.AuthPrefix) > maxPrefixLen || hasControl(c.AuthPrefix) {
		return invalid("auth_prefix", "must be at most %d bytes without control characters", maxPrefixLen)
	}
	if !headerNamePattern.MatchString(c.AuthHeaderName) {
		return invalid("auth_header_name", "must be an HTTP header name")
	}
	if c.AuthQueryParam == "" || len(c.AuthQueryParam) > 128 || strings.ContainsAny(c.AuthQueryParam, "&=#?") || hasControl(c.AuthQueryParam) {
		return invalid("auth_query_param", "must be 1-128 bytes without '&', '=', '#', '?' or control characters")
	}
	if c.Protocol == ProtocolHTTP && c.AuthSecretKey == "" && c.AuthMode != AuthOAuth2AuthorizationCode {
		return invalid("auth_secret_key", "is required for http connections (the client secret for %q)", AuthOAuth2ClientCredentials)
	}
	if c.AuthSecretKey != "" && !slices.Contains(secretNames, c.AuthSecretKey) {
		return invalid("secrets", "must contain the entry named by auth_secret_key (%q)", c.AuthSecretKey)
	}
	switch c.Status {
	case StatusActive, StatusDisabled:
	default:
		return invalid("status", "must be %q or %q", StatusActive, StatusDisabled)
	}
	if c.RotationIntervalDays < 0 || c.RotationIntervalDays > maxRotationDays {
		return invalid("rotation_interval_days", "must be between 0 and %d", maxRotationDays)
	}
	if c.AllowUpstreamCookies && c.Protocol != ProtocolHTTP {
		return invalid("allow_upstream_cookies", "applies to %q connections only", ProtocolHTTP)
	}
	return validateApprovals(c)
}

// validateApprovals checks approval_tools, approval_routes and
// approval_subjects; tools apply to mcp connections, routes to http ones.
func validateApprovals(c *Connection) error {
	if len(c.ApprovalTools) > 0 && c.Protocol != ProtocolMCP {
		return invalid("approval_tools", "applies to %q connections only", ProtocolMCP)
	}
	if len(c.ApprovalRoutes) > 0 && c.Protocol != ProtocolHTTP {
		return invalid("approval_routes", "applies to %q connections only", ProtocolHTTP)
	}
	if err := approval.CheckSubjects(c.ApprovalSubjects); err != nil {
		return invalid("approval_subjects", "%s", strings.TrimPrefix(err.Error(), "approval: "))
	}
	for _, s := range slices.Sorted(maps.Keys(c.ApprovalSubjects)) {
		r := c.ApprovalSubjects[s]
		if len(r.Tools) > 0 && c.Protocol != ProtocolMCP {
			return invalid("approval_subjects", "subject %q: approval_tools applies to %q connections only", s, ProtocolMCP)
		}
		if len(r.Routes) > 0 && c.Protocol != ProtocolHTTP {
			return invalid("approval_subjects", "subject %q: approval_routes applies to %q connections only", s, ProtocolHTTP)
		}
	}
	if err := (approval.Rules{Tools: c.ApprovalTools}).Check(); err != nil {
		return invalid("approval_tools", "%s", strings.TrimPrefix(err.Error(), "approval: "))
	}
	if err := (approval.Rules{Routes: c.ApprovalRoutes}).Check(); err != nil {
		return invalid("approval_routes", "%s", strings.TrimPrefix(err.Error(), "approval: "))
	}
	return nil
}

func validateSecrets(secrets map[string]string) error {
	if len(secrets) > maxSecrets {
		return invalid("secrets", "has more than %d entries", maxSecrets)
	}
	for name, v := range secrets {
		if !secretNamePattern.MatchString(name) {
			return invalid("secrets", "names must be 1-128 letters, digits, '_', '.' or '-'")
		}
		if err := validateSecretValue(name, v); err != nil {
			return err
		}
	}
	return nil
}

func validateSecretValue(name, v string) error {
	if v == "" {
		return invalid("secrets", "value of %q is empty", name)
	}
	if len(v) > maxSecretLen {
		return invalid("secrets", "value of %q is longer than %d bytes", name, maxSecretLen)
	}
	if hasControl(v) {
		return invalid("secrets", "value of %q contains control characters", name)
	}
	refs, err := TemplateReferences(v)
	if err != nil {
		var te *TemplateError
		if errors.As(err, &te) {
			return invalid("secrets", "value of %q: %s", name, te.Reason)
		}
		return err
	}
	if len(refs) == 0 && len(v) < MinSecretLen {
		return invalid("secrets", "value of %q is shorter than %d bytes, the minimum: the gateway removes the secret from "+
			"every response, and a shorter one also matches ordinary text there, which it would corrupt", name, MinSecretLen)
	}
	return nil
}

func validateRotationMeta(by, reason string) error {
	if len(by) > maxSubjectLen || display.Check(by) != nil {
		return invalid("rotated_by", "must be at most %d bytes without control or invisible characters", maxSubjectLen)
	}
	if len(reason) > maxReasonLen || display.Check(reason) != nil {
		return invalid("reason", "must be at most %d bytes without control or invisible characters", maxReasonLen)
	}
	return nil
}

func hasControl(s string) bool {
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return true
		}
	}
	return false
}

func hasDotSegment(p string) bool {
	for seg := range strings.SplitSeq(p, "/") {
		if seg == "." || seg == ".." {
			return true
		}
	}
	return false
}
