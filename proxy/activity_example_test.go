package proxy_test

import (
	"fmt"

	"github.com/idnhq/idn/proxy"
)

// The route an activity record keeps of the path after the connection:
// words and versions stay, values become {id}.
func ExampleRouteTemplate() {
	fmt.Println(proxy.RouteTemplate("/v3/repos/octo/7f3a9c1e2b4d/issues/42"))
	fmt.Println(proxy.RouteTemplate("/api/chat.postMessage"))
	fmt.Println(proxy.RouteTemplate("/users/bob@example.com"))
	// Output:
	// /v3/repos/octo/{id}/issues/{id}
	// /api/chat.postMessage
	// /users/{id}
}
