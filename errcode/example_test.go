package errcode_test

import (
	"errors"
	"fmt"

	"github.com/idnhq/idn/errcode"
)

var errNotApproved = errcode.New(errcode.AuthClaimRequired, "store: no approved claim")

func ExampleOf() {
	err := fmt.Errorf("lookup: %w", errNotApproved)
	if code, ok := errcode.Of(err); ok {
		fmt.Println(code, code.Status())
	}
	fmt.Println(errors.Is(err, errNotApproved))
	// Output:
	// AUTH_CLAIM_REQUIRED 403
	// true
}
