package toolpolicy_test

import (
	"fmt"

	"github.com/idnhq/idn/mcpproxy/toolpolicy"
)

func ExamplePolicy() {
	p := toolpolicy.Policy{
		Allow:    []string{"github.*"},
		Deny:     []string{"github.*.delete"},
		Subjects: map[string]toolpolicy.SubjectPolicy{"ci-bot": {Allow: []string{"github.repos.*"}}},
	}
	discovered := []string{"github.issues.list", "github.repos.delete", "github.repos.list", "slack.post"}
	fmt.Println(p.Filter("ci-bot", discovered))
	fmt.Println(p.Filter("alice", discovered))
	d := p.Explain("ci-bot", "github.issues.list", discovered)
	fmt.Println(d.Allowed, d.Source)
	// Output:
	// [github.repos.list]
	// [github.issues.list github.repos.list]
	// false subject_allowlist
}
