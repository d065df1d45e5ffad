package cluster_test

import (
	"context"
	"log"

	"github.com/poolrun/poolrun/cluster"
	"github.com/poolrun/poolrun/cluster/hub"
	"github.com/poolrun/poolrun/engine"
)

// A pool whose server, on every address of this host, presents the
// site's own certificate (it must cover this host's name or one of its
// addresses), and whose jobs write in a folder that every host mounts at
// the same path: a worker that cannot write there does not join.
func ExampleOutputs() {
	srv, err := hub.Start("0.0.0.0:4222", hub.TLSFiles("/etc/pki/pool.crt", "/etc/pki/pool.key"))
	if err != nil {
		log.Fatal(err)
	}
	l, err := cluster.Listen(srv, "run.join", cluster.Outputs("/shared/project/out"))
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	p := engine.New(engine.Workers(2), l.Option())
	// Queue the jobs, then:
	if err := p.Run(context.Background()); err != nil {
		log.Fatal(err)
	}
}
