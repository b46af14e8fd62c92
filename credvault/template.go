package credvault

import (
	"fmt"
	"strings"
)

// TemplateError reports a malformed {{KEY}} reference. Reason never quotes
// the value, which is a secret.
type TemplateError struct {
	Offset int // byte offset of the offending "{{"
	Reason string
}

func (e *TemplateError) Error() string { return "credvault: " + e.Reason }

// TemplateReferences returns the variable keys that a secret value
// references as {{KEY}}, in order of appearance, duplicates included. A
// value may be a whole reference ("{{GITHUB_TOKEN}}") or contain several
// inline ("Bearer {{TOKEN}}"). A "{{" that does not start a well-formed
// reference, and a stray "}}", are errors: secrets are never guessed at.
func TemplateReferences(value string) ([]string, error) {
	var keys []string
	err := walkTemplate(value, func(literal string) {}, func(key string) { keys = append(keys, key) })
	return keys, err
}

// resolveTemplate replaces each {{KEY}} in value by vars[KEY]. The error
// names the missing keys, never the value.
func resolveTemplate(value string, vars map[string]string) (string, error) {
	if !strings.Contains(value, "{{") && !strings.Contains(value, "}}") {
		return value, nil
	}
	var b strings.Builder
	var missing []string
	err := walkTemplate(value,
		func(literal string) { b.WriteString(literal) },
		func(key string) {
			v, ok := vars[key]
			if !ok {
				missing = append(missing, key)
			}
			b.WriteString(v)
		})
	if err != nil {
		return "", err
	}
	if len(missing) > 0 {
		return "", fmt.Errorf("%w: credential variable %s is not defined", ErrCredentialUnresolved, strings.Join(missing, ", "))
	}
	return b.String(), nil
}

func walkTemplate(s string, literal func(string), ref func(string)) error {
	off := 0
	for {
		i := strings.Index(s, "{{")
		if i < 0 {
			if j := strings.Index(s, "}}"); j >= 0 {
				return &TemplateError{Offset: off + j, Reason: fmt.Sprintf("unmatched \"}}\" at offset %d", off+j)}
			}
			literal(s)
			return nil
		}
		if j := strings.Index(s[:i], "}}"); j >= 0 {
			return &TemplateError{Offset: off + j, Reason: fmt.Sprintf("unmatched \"}}\" at offset %d", off+j)}
		}
		literal(s[:i])
		end := strings.Index(s[i+2:], "}}")
		if end < 0 {
			return &TemplateError{Offset: off + i, Reason: fmt.Sprintf("unterminated \"{{\" at offset %d", off+i)}
		}
		key := s[i+2 : i+2+end]
		if !variableKeyPattern.MatchString(key) {
			return &TemplateError{Offset: off + i, Reason: fmt.Sprintf("reference at offset %d is not {{KEY}} with KEY a letter or '_' then letters, digits or '_'", off+i)}
		}
		ref(key)
		consumed := i + 2 + end + 2
		off += consumed
		s = s[consumed:]
	}
}
