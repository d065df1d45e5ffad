package hub_test

import (
	"fmt"
	"strings"

	"github.com/poolrun/poolrun/cluster/hub"
)

// A server on loopback with a free port: plain NATS, and the token every
// client must present. A pool passes it to cluster.Listen.
func ExampleStart() {
	srv, err := hub.Start("")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close()
	fmt.Println(strings.HasPrefix(srv.URL(), "nats://127.0.0.1:"), len(srv.Token()), srv.CA() == "")
	// Output: true 64 true
}
