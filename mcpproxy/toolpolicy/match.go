package toolpolicy

import (
	"strings"
	"unicode/utf8"
)

// matchWildcard reports whether name matches pattern, where '*' matches any
// run of characters (dots included, so "github.*" covers "github.repos.list")
// and '?' matches exactly one character. Every other character matches
// itself; there is no escape syntax because tool names never contain '*' or
// '?'. Matching is by runes and runs in O(len(pattern)·len(name)) at worst:
// the classic single-backtrack-point algorithm, so hostile patterns such as
// "*a*a*a*a*b" cannot make it exponential.
func matchWildcard(pattern, name string) bool {
	// Fast paths for the common shapes: an exact name and "prefix.*".
	switch strings.IndexAny(pattern, "*?") {
	case -1:
		return pattern == name
	case len(pattern) - 1:
		if pattern[len(pattern)-1] == '*' {
			return strings.HasPrefix(name, pattern[:len(pattern)-1])
		}
	}
	p, n := 0, 0
	starP, starN := -1, 0
	for n < len(name) {
		if p < len(pattern) {
			pc, pw := utf8.DecodeRuneInString(pattern[p:])
			switch pc {
			case '*':
				starP, starN = p, n
				p += pw
				continue
			case '?':
				_, nw := utf8.DecodeRuneInString(name[n:])
				p += pw
				n += nw
				continue
			default:
				nc, nw := utf8.DecodeRuneInString(name[n:])
				if pc == nc {
					p += pw
					n += nw
					continue
				}
			}
		}
		if starP < 0 {
			return false
		}
		// Let the last '*' swallow one more character and retry from there.
		_, nw := utf8.DecodeRuneInString(name[starN:])
		starN += nw
		n = starN
		p = starP + 1
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}

// Match reports whether name matches pattern with the lists' wildcards:
// '*' matches any run of characters and '?' exactly one. Other packages
// (the gateway's approval rules) use it so every tool list reads alike.
func Match(pattern, name string) bool { return matchWildcard(pattern, name) }

// matchAny reports whether name matches any of patterns.
func matchAny(patterns []string, name string) bool {
	for _, pat := range patterns {
		if matchWildcard(pat, name) {
			return true
		}
	}
	return false
}
