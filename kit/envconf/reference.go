package envconf

import (
	"bufio"
	"bytes"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// CheckReference holds vars to the settings tables of a Markdown
// reference: the rows under the heading "## Settings" (up to the next
// level-two heading) whose first cell is a variable name in backticks and
// whose second cell says its default. It returns one problem for each
// variable without a row, each row whose default cell does not show the
// variable's default in backticks, and each row that names a variable not
// in vars, so the reference and the code cannot drift apart unseen.
func CheckReference(vars []Var, markdown []byte) []string {
	rows, order := settingRows(markdown)
	var problems []string
	known := map[string]bool{}
	for _, v := range vars {
		known[v.Name] = true
		row, ok := rows[v.Name]
		def := row.def
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("%s is read but has no row in the settings tables", v.Name))
		case v.Default != "" && !strings.Contains(def, "`"+v.Default+"`"):
			problems = append(problems, fmt.Sprintf("%s: the default cell %q does not show the default `%s`", v.Name, def, v.Default))
		}
	}
	for _, name := range order {
		if !known[name] {
			problems = append(problems, fmt.Sprintf("%s has a row in the settings tables but is not read", name))
		}
	}
	return problems
}

// settingRow is one row of a settings table: its default and meaning
// cells, as written.
type settingRow struct{ def, meaning string }

// settingRows reads the settings tables of a Markdown reference (see
// CheckReference), by variable name and in order.
func settingRows(markdown []byte) (map[string]settingRow, []string) {
	rows := map[string]settingRow{}
	var order []string
	in := false
	sc := bufio.NewScanner(bytes.NewReader(markdown))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "## ") {
			in = line == "## Settings"
			continue
		}
		if !in || !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(line, "|")
		if len(cells) < 4 {
			continue
		}
		name := strings.Trim(strings.TrimSpace(cells[1]), "`")
		rows[name] = settingRow{def: strings.TrimSpace(cells[2]), meaning: strings.TrimSpace(strings.Join(cells[3:len(cells)-1], "|"))}
		order = append(order, name)
	}
	return rows, order
}

// markdownLink is an inline link, [text](target).
var markdownLink = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)

// WithReference returns vars with each Doc replaced by the meaning its row
// in the Markdown reference gives, as plain text (code spans and links
// reduced to their text), so -h says what the reference says. A variable
// without a row keeps its Doc; CheckReference reports it.
func WithReference(vars []Var, markdown []byte) []Var {
	rows, _ := settingRows(markdown)
	out := slices.Clone(vars)
	for i, v := range out {
		if row, ok := rows[v.Name]; ok && row.meaning != "" {
			out[i].Doc = strings.ReplaceAll(markdownLink.ReplaceAllString(row.meaning, "$1"), "`", "")
		}
	}
	return out
}
