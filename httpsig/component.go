package httpsig

import (
	"github.com/dunglas/httpsfv"
)

// Derived component names (RFC 9421 §2.2).
const (
	compMethod          = "@method"
	compTargetURI       = "@target-uri"
	compAuthority       = "@authority"
	compScheme          = "@scheme"
	compRequestTarget   = "@request-target"
	compPath            = "@path"
	compQuery           = "@query"
	compQueryParam      = "@query-param"
	compStatus          = "@status"
	compSignatureParams = "@signature-params"
)

// Component parameter names (RFC 9421 §6.5 registry).
const (
	paramSF   = "sf"
	paramKey  = "key"
	paramBS   = "bs"
	paramReq  = "req"
	paramTR   = "tr"
	paramName = "name"
)

func isDerived(name string) bool { return len(name) > 0 && name[0] == '@' }

func knownDerived(name string) bool {
	switch name {
	case compMethod, compTargetURI, compAuthority, compScheme, compRequestTarget,
		compPath, compQuery, compQueryParam, compStatus:
		return true
	}
	return false
}

// validFieldName reports whether name is a lower-case HTTP field name
// (RFC 9110 §5.1 token), as RFC 9421 §2.1 requires of component names.
func validFieldName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case c == '!' || c == '#' || c == '$' || c == '%' || c == '&' || c == '\'' || c == '*' ||
			c == '+' || c == '-' || c == '.' || c == '^' || c == '_' || c == '`' || c == '|' || c == '~':
		default:
			return false
		}
	}
	return true
}

// check validates the combination of name and parameters, the same way for
// signer and verifier. forResponse is true when the signature is over a
// response.
func (c *Component) check(forResponse bool) error {
	if isDerived(c.Name) {
		if !knownDerived(c.Name) {
			return newError(ErrComponentsInvalid, "unknown derived component "+quoteForError(c.Name))
		}
		if c.SF || c.Key != "" || c.BS || c.TR {
			return newError(ErrComponentsInvalid, "field parameters on derived component "+c.Name)
		}
		if (c.Name == compQueryParam) != (c.QueryName != "") {
			return newError(ErrComponentsInvalid, `"@query-param" needs exactly one name parameter`)
		}
		if c.Req && !forResponse {
			return newError(ErrComponentsInvalid, "req parameter in a request signature")
		}
		// @status is only defined for responses and cannot be taken from a
		// request; everything else is request-only (§2.2).
		if c.Name == compStatus {
			if !forResponse || c.Req {
				return newError(ErrComponentsInvalid, `"@status" outside a response`)
			}
		} else if forResponse && !c.Req {
			return newError(ErrComponentsInvalid, "request component "+c.Name+" in a response signature without req")
		}
		return nil
	}
	if !validFieldName(c.Name) {
		return newError(ErrComponentsInvalid, "invalid component name "+quoteForError(c.Name))
	}
	if c.QueryName != "" {
		return newError(ErrComponentsInvalid, "name parameter on field "+c.Name)
	}
	if c.BS && (c.SF || c.Key != "") {
		return newError(ErrComponentsInvalid, "bs combined with sf or key on "+c.Name)
	}
	if c.Req && !forResponse {
		return newError(ErrComponentsInvalid, "req parameter in a request signature")
	}
	return nil
}

// appendIdentifier serialises c as a component identifier (RFC 9421 §2):
// an sf-string with parameters in the order key/name, sf, bs, tr, req.
func (c *Component) appendIdentifier(b []byte) ([]byte, error) {
	b, err := appendString(b, c.Name)
	if err != nil {
		return b, err
	}
	if c.Key != "" {
		b = append(b, ";key="...)
		if b, err = appendString(b, c.Key); err != nil {
			return b, err
		}
	}
	if c.QueryName != "" {
		b = append(b, ";name="...)
		if b, err = appendString(b, c.QueryName); err != nil {
			return b, err
		}
	}
	if c.SF {
		b = append(b, ";sf"...)
	}
	if c.BS {
		b = append(b, ";bs"...)
	}
	if c.TR {
		b = append(b, ";tr"...)
	}
	if c.Req {
		b = append(b, ";req"...)
	}
	return b, nil
}

// componentFromItem interprets one member of a received covered-components
// inner list. Parameters must be of the registered types; unknown ones are
// rejected (RFC 9421 §2.5 step 2: the verifier must understand them).
func componentFromItem(it httpsfv.Item) (Component, error) {
	name, ok := it.Value.(string)
	if !ok {
		return Component{}, newError(ErrComponentsInvalid, "covered component is not a string")
	}
	c := Component{Name: name}
	if it.Params == nil {
		return c, nil
	}
	for _, k := range it.Params.Names() {
		v, _ := it.Params.Get(k)
		switch k {
		case paramSF, paramBS, paramReq, paramTR:
			if v != true {
				return c, newError(ErrComponentsInvalid, "component parameter "+k+" is not ?1")
			}
			switch k {
			case paramSF:
				c.SF = true
			case paramBS:
				c.BS = true
			case paramReq:
				c.Req = true
			case paramTR:
				c.TR = true
			}
		case paramKey, paramName:
			s, ok := v.(string)
			if !ok || s == "" {
				return c, newError(ErrComponentsInvalid, "component parameter "+k+" is not a non-empty string")
			}
			if k == paramKey {
				c.Key = s
			} else {
				c.QueryName = s
			}
		default:
			return c, newError(ErrComponentsInvalid, "unknown component parameter "+quoteForError(k))
		}
	}
	return c, nil
}
