package egress_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/idnhq/idn/controlplane/internal/webhooks/egress"
)

// ExampleCheckURL checks target URLs when they are saved; NewClient checks
// the addresses again when it connects.
func ExampleCheckURL() {
	for _, u := range []string{"https://hooks.example.com/idn", "http://169.254.169.254/latest/meta-data/", "ftp://files.example.com/"} {
		switch err := egress.CheckURL(u, false); {
		case err == nil:
			fmt.Println("ok:", u)
		case errors.Is(err, egress.ErrForbidden):
			fmt.Println("forbidden:", u)
		default:
			fmt.Println("invalid:", err)
		}
	}
	client, err := egress.NewClient(egress.Config{Timeout: 10 * time.Second})
	fmt.Println(client != nil, err)
	// Output:
	// ok: https://hooks.example.com/idn
	// forbidden: http://169.254.169.254/latest/meta-data/
	// invalid: url must be an absolute http or https URL
	// true <nil>
}
