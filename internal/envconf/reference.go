package envconf

import (
	"bufio"
	"bytes"
	"fmt"
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
	rows := map[string]string{} // name → default cell
	var order []string
	in := false
	sc := bufio.NewScanner(bytes.NewReader(markdown))
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
		rows[name] = strings.TrimSpace(cells[2])
		order = append(order, name)
	}
	var problems []string
	known := map[string]bool{}
	for _, v := range vars {
		known[v.Name] = true
		def, ok := rows[v.Name]
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
