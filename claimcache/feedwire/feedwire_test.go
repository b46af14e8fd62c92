package feedwire

import "testing"

func TestParseCursor(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"0", 0, true},
		{"42", 42, true},
		{"9223372036854775807", 1<<63 - 1, true},
		{"", 0, false},
		{"-1", 0, false},
		{"+1", 0, false},
		{"007", 0, false},
		{"1e3", 0, false},
		{" 1", 0, false},
		{"9223372036854775808", 0, false},
	} {
		got, err := ParseCursor(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseCursor(%q) = %d, %v", tc.in, got, err)
		}
		if tc.ok && FormatCursor(got) != tc.in {
			t.Errorf("FormatCursor(%d) = %q", got, FormatCursor(got))
		}
	}
}

func FuzzParseCursor(f *testing.F) {
	f.Add("12")
	f.Add("01")
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseCursor(s)
		if err == nil && FormatCursor(n) != s {
			t.Fatalf("%q parsed as %d", s, n)
		}
	})
}
