package upstream

import (
	"errors"
	"net/url"
	"strings"
)

// ResolveEndpoint joins mcp_endpoint to base_url: a full URL is used as is;
// a path is appended to the base path, and queries are merged.
func ResolveEndpoint(base, endpoint string) (*url.URL, error) {
	ep, err := url.Parse(endpoint)
	if err != nil {
		return nil, err
	}
	var u *url.URL
	if ep.IsAbs() {
		u = ep
	} else {
		b, err := url.Parse(base)
		if err != nil {
			return nil, err
		}
		u = b
		if ep.Path != "" {
			u.Path = strings.TrimSuffix(b.Path, "/") + "/" + strings.TrimPrefix(ep.Path, "/")
			u.RawPath = ""
		}
		if ep.RawQuery != "" {
			if u.RawQuery != "" {
				u.RawQuery += "&"
			}
			u.RawQuery += ep.RawQuery
		}
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errors.New("endpoint must be an http or https URL")
	}
	u.Fragment, u.RawFragment = "", ""
	return u, nil
}
