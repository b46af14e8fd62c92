// Package display decides which strings may be shown to an owner as names:
// agent names and ids, subjects, service, connection, passkey and gateway
// names, webhook URLs, everything a dashboard shows beside a decision such
// as Approve. Both servers refuse at input what Check refuses, and the
// dashboard renders stored strings through Shown, so that one written
// before the check (or by an older version) still shows what it holds.
//
// A display string is valid UTF-8 without any rune Hidden reports: a
// character that renders as nothing, reorders or hides the text around it,
// or passes for an ASCII space. U+202E RIGHT-TO-LEFT OVERRIDE, for one,
// makes "gpj.exe" read as "exe.jpg". Visible look-alikes from other
// scripts (a Cyrillic "а" for a Latin "a") are allowed: they render as
// themselves, and telling scripts apart is the reader's part.
package display

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Hidden reports whether r is refused in a display string:
//
//   - controls (category Cc): U+0000–U+001F, U+007F–U+009F, tab and
//     newline included, as a display string is one line;
//   - format characters (Cf): the bidirectional embeddings, overrides and
//     isolates U+202A–U+202E and U+2066–U+2069, the marks U+200E, U+200F
//     and U+061C, the zero-width space, non-joiner and joiner
//     U+200B–U+200D, the word joiner and invisible operators
//     U+2060–U+2064, U+FEFF, the soft hyphen U+00AD, the tag characters
//     U+E0001–U+E007F, and the rest of the category;
//   - the line and paragraph separators U+2028 and U+2029 (Zl, Zp);
//   - space separators (Zs) other than U+0020, such as U+00A0, U+2000–U+200A
//     and U+3000, which pass for an ASCII space or for nothing;
//   - private-use characters (Co), which render as whatever a font puts
//     there;
//   - the other default-ignorable code points that render as nothing:
//     U+034F, the Hangul fillers U+115F, U+1160, U+3164 and U+FFA0,
//     U+17B4, U+17B5, U+2065, U+FFF0–U+FFF8, U+E0000, U+E0002–U+E001F,
//     U+E0080–U+E00FF and U+E01F0–U+E0FFF;
//   - noncharacters (U+FDD0–U+FDEF, and U+xFFFE and U+xFFFF of every
//     plane).
//
// Variation selectors (U+FE00–U+FE0F and U+E0100–U+E01EF) are allowed:
// emoji need them, and alone they change nothing. So are combining marks
// and unassigned code points.
func Hidden(r rune) bool {
	switch {
	case r == ' ':
		return false
	case r < ' ':
		return true
	case r < 0x7f:
		return false
	}
	return unicode.In(r, unicode.Cc, unicode.Cf, unicode.Zl, unicode.Zp, unicode.Zs, unicode.Co,
		unicode.Other_Default_Ignorable_Code_Point, unicode.Noncharacter_Code_Point)
}

// Check returns nil when s is a valid display string: valid UTF-8 without
// a rune Hidden reports. Otherwise its error names the first offender the
// way Shown writes it, e.g. "contains \u202E, an invisible or control
// character".
func Check(s string) error {
	for i, r := range s {
		if r == utf8.RuneError {
			if _, size := utf8.DecodeRuneInString(s[i:]); size == 1 {
				return fmt.Errorf("contains the byte \\x%02X, which is not UTF-8", s[i])
			}
		}
		if Hidden(r) {
			return fmt.Errorf("contains %s, an invisible or control character", escape(r))
		}
	}
	return nil
}

// Shown returns s for display: every rune Hidden reports written as
// \uXXXX (or \UXXXXXXXX beyond the Basic Multilingual Plane) and every
// byte that is not UTF-8 as \xXX, upper-case hex. What Check accepts is
// returned unchanged, and what Shown returns, Check accepts.
func Shown(s string) string {
	if Check(s) == nil {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, "\\x%02X", s[i])
		case Hidden(r):
			b.WriteString(escape(r))
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

func escape(r rune) string {
	if r > 0xFFFF {
		return fmt.Sprintf("\\U%08X", r)
	}
	return fmt.Sprintf("\\u%04X", r)
}
