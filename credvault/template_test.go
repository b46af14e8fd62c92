package credvault

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestTemplate(t *testing.T) {
	t.Parallel()
	vars := map[string]string{"TOKEN": "t0k", "ORG": "acme", "EMPTYISH": "e"}
	cases := []struct {
		name, in, want string
		refs           []string
		parseErr       bool
		unresolved     bool
	}{
		{name: "plain_secret", in: "sk-abc", want: "sk-abc"},
		{name: "whole_reference", in: "{{TOKEN}}", want: "t0k", refs: []string{"TOKEN"}},
		{name: "inline_reference", in: "Bearer {{TOKEN}}", want: "Bearer t0k", refs: []string{"TOKEN"}},
		{name: "two_references", in: "{{ORG}}:{{TOKEN}}", want: "acme:t0k", refs: []string{"ORG", "TOKEN"}},
		{name: "adjacent_references", in: "{{ORG}}{{ORG}}", want: "acmeacme", refs: []string{"ORG", "ORG"}},
		{name: "missing_variable", in: "x{{NOPE}}", refs: []string{"NOPE"}, unresolved: true},
		{name: "unterminated", in: "abc{{TOKEN", parseErr: true},
		{name: "stray_close", in: "abc}}", parseErr: true},
		{name: "close_before_open", in: "}}{{TOKEN}}", parseErr: true},
		{name: "empty_reference", in: "{{}}", parseErr: true},
		{name: "space_in_reference", in: "{{ TOKEN }}", parseErr: true},
		{name: "triple_brace", in: "{{{TOKEN}}}", parseErr: true},
		{name: "dash_in_key", in: "{{MY-KEY}}", parseErr: true},
		{name: "digit_first_key", in: "{{1KEY}}", parseErr: true},
		{name: "single_braces_are_literal", in: "{a}", want: "{a}"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			refs, err := TemplateReferences(c.in)
			if c.parseErr {
				var te *TemplateError
				if !errors.As(err, &te) {
					t.Fatalf("TemplateReferences err = %v, want *TemplateError", err)
				}
				return
			}
			if err != nil || !slices.Equal(refs, c.refs) {
				t.Fatalf("TemplateReferences = %v, %v; want %v", refs, err, c.refs)
			}
			got, err := resolveTemplate(c.in, vars)
			if c.unresolved {
				if !errors.Is(err, ErrCredentialUnresolved) || !strings.Contains(err.Error(), "NOPE") {
					t.Fatalf("resolve err = %v", err)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("resolve = %q, %v; want %q", got, err, c.want)
			}
		})
	}
}

// FuzzTemplate checks that the parser never panics, that resolution agrees
// with the references it reports, and that errors never quote the value.
func FuzzTemplate(f *testing.F) {
	for _, s := range []string{"", "plain", "{{A}}", "Bearer {{TOKEN}}", "{{A}}{{B_2}}", "{{", "}}", "{{{A}}}", "{{a b}}", "x}}y{{z"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		refs, err := TemplateReferences(s)
		if err != nil {
			if len(s) >= 8 && strings.Contains(err.Error(), s) {
				t.Fatalf("error quotes the value")
			}
			return
		}
		vars := map[string]string{}
		for _, r := range refs {
			if err := ValidateVariableKey(r); err != nil {
				t.Fatalf("reported invalid key %q", r)
			}
			vars[r] = "<" + r + ">"
		}
		out, err := resolveTemplate(s, vars)
		if err != nil {
			t.Fatalf("resolve failed with every reference defined: %v", err)
		}
		if len(refs) == 0 && out != s {
			t.Fatalf("value without references changed: %q → %q", s, out)
		}
	})
}
