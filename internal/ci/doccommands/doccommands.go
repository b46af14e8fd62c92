// Package doccommands finds the shell commands README.md and docs/*.md
// show in their code blocks, so that a test can hold each to the
// programs it names: docs cannot drift from the command lines that work.
// Its test runs the commands that are safe offline (the binaries' help
// and version), checks the subcommands and flags of the others against
// the binaries' help, and requires the rest to be listed as not runnable
// there, with the reason.
package doccommands

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Command is one shell command line of a code block, continuation lines
// joined.
type Command struct {
	File string // relative to the repository's root
	Line int
	Text string
	// Segments are its simple commands (split at &&, ||, ; and |), each
	// as words, with leading variable assignments and comments removed.
	Segments [][]string
}

// Block is a fenced code block whose info string names no language.
type Block struct {
	File string
	Line int
}

// shellLanguages are the info strings of code blocks holding commands.
var shellLanguages = map[string]bool{"sh": true, "bash": true, "shell": true, "console": true}

// Find reads README.md and docs/*.md under root and returns their shell
// commands and the code blocks that name no language (which could hide a
// command from the check).
func Find(root string) ([]Command, []Block, error) {
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		return nil, nil, err
	}
	files = append([]string{filepath.Join(root, "README.md")}, files...)
	var cmds []Command
	var bare []Block
	for _, path := range files {
		rel, _ := filepath.Rel(root, path)
		c, b, err := findIn(path, filepath.ToSlash(rel))
		if err != nil {
			return nil, nil, err
		}
		cmds, bare = append(cmds, c...), append(bare, b...)
	}
	return cmds, bare, nil
}

func findIn(path, rel string) ([]Command, []Block, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	var cmds []Command
	var bare []Block
	var fence, lang string // the open block's fence and info string
	var pending *Command   // a command continued on the next line
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if fence == "" {
			if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
				fence, lang = trimmed[:3], ""
				if info := strings.Fields(trimmed[3:]); len(info) > 0 {
					lang = info[0]
				} else {
					bare = append(bare, Block{File: rel, Line: n})
				}
			}
			continue
		}
		if strings.HasPrefix(trimmed, fence) {
			fence = ""
			continue
		}
		if !shellLanguages[lang] {
			continue
		}
		if lang == "console" {
			// A console block shows output too: only prompted lines are
			// commands.
			rest, ok := strings.CutPrefix(trimmed, "$ ")
			if !ok && pending == nil {
				continue
			}
			if ok {
				trimmed = rest
			}
		}
		if pending == nil {
			if trimmed == "" || strings.HasPrefix(trimmed, "#") {
				continue
			}
			pending = &Command{File: rel, Line: n}
		}
		if body, more := strings.CutSuffix(trimmed, `\`); more {
			pending.Text += body
			continue
		}
		pending.Text = strings.TrimSpace(pending.Text + trimmed)
		segs, err := Split(pending.Text)
		if err != nil {
			return nil, nil, fmt.Errorf("%s:%d: %w", rel, pending.Line, err)
		}
		pending.Segments = segs
		cmds = append(cmds, *pending)
		pending = nil
	}
	return cmds, bare, sc.Err()
}

// Split reads a command line as a POSIX shell would split it into simple
// commands and words: quotes and backslashes, comments, the operators &&,
// ||, ; and |. Leading NAME=value words are left out. It knows no
// expansion: $VAR and globs stay as they are written.
func Split(line string) ([][]string, error) {
	var segs [][]string
	var words []string
	var word strings.Builder
	inWord := false
	end := func() {
		if inWord {
			words = append(words, word.String())
			word.Reset()
			inWord = false
		}
	}
	cut := func() {
		end()
		for len(words) > 0 && isAssignment(words[0]) {
			words = words[1:]
		}
		if len(words) > 0 {
			segs = append(segs, words)
		}
		words = nil
	}
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == '\'':
			j := strings.IndexByte(line[i+1:], '\'')
			if j < 0 {
				return nil, fmt.Errorf("doccommands: unclosed ' in %q", line)
			}
			word.WriteString(line[i+1 : i+1+j])
			inWord, i = true, i+1+j
		case c == '"':
			i++
			for ; i < len(line) && line[i] != '"'; i++ {
				if line[i] == '\\' && i+1 < len(line) && strings.IndexByte(`"\$`+"`", line[i+1]) >= 0 {
					i++
				}
				word.WriteByte(line[i])
			}
			if i >= len(line) {
				return nil, fmt.Errorf(`doccommands: unclosed " in %q`, line)
			}
			inWord = true
		case c == '\\' && i+1 < len(line):
			i++
			word.WriteByte(line[i])
			inWord = true
		case c == '#' && !inWord:
			cut()
			return segs, nil
		case c == ' ' || c == '\t':
			end()
		case c == ';' || c == '|' || c == '&':
			if i+1 < len(line) && (line[i+1] == c) {
				i++
			}
			cut()
		default:
			word.WriteByte(c)
			inWord = true
		}
	}
	cut()
	return segs, nil
}

// isAssignment reports whether w is NAME=value.
func isAssignment(w string) bool {
	name, _, ok := strings.Cut(w, "=")
	if !ok || name == "" {
		return false
	}
	for i, r := range name {
		if !(r == '_' || 'A' <= r && r <= 'Z' || 'a' <= r && r <= 'z' || i > 0 && '0' <= r && r <= '9') {
			return false
		}
	}
	return true
}
