package envconf

import "strings"

// Family reads every variable named prefix+SUFFIX in environ ("NAME=value"
// entries, as os.Environ returns them) and returns the non-empty values by
// suffix. It is recorded once, as prefix+placeholder
// ("IDN_SERVICE_API_KEY_" + "<CONNECTION_ID>").
func (r *Reader) Family(prefix, placeholder, doc string, environ []string) map[string]string {
	r.note(prefix+placeholder, "", doc)
	out := map[string]string{}
	for _, kv := range environ {
		name, value, _ := strings.Cut(kv, "=")
		if suffix, ok := strings.CutPrefix(name, prefix); ok && suffix != "" {
			if value = strings.TrimSpace(value); value != "" {
				out[suffix] = value
			}
		}
	}
	return out
}
