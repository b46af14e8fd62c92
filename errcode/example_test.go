package errcode_test

import (
	"errors"
	"fmt"

	"github.com/idnhq/idn/errcode"
)

// errNoCaller is how a program's own mcpproxy Caller hook refuses a
// request it cannot tie to a caller.
var errNoCaller = errcode.New(errcode.AuthForbidden, "myapp: no verified caller")

func ExampleOf() {
	err := fmt.Errorf("lookup: %w", errNoCaller)
	if code, ok := errcode.Of(err); ok {
		fmt.Println(code, code.Status())
	}
	fmt.Println(errors.Is(err, errNoCaller))
	// Output:
	// AUTH_FORBIDDEN 403
	// true
}
