package cluster_test

import (
	"github.com/poolrun/poolrun/cluster"
	"github.com/poolrun/poolrun/cluster/hub"
)

// listen serves a pool through a server in this process on addr.
func listen(addr, joinFile string, opts ...cluster.ListenOption) (*cluster.Listener, error) {
	l, _, err := listenServer(addr, joinFile, opts...)
	return l, err
}

// listenServer is listen, which also returns the server.
func listenServer(addr, joinFile string, opts ...cluster.ListenOption) (*cluster.Listener, *hub.Server, error) {
	srv, err := hub.Start(addr)
	if err != nil {
		return nil, nil, err
	}
	l, err := cluster.Listen(srv, joinFile, opts...)
	return l, srv, err
}

// joinOf is a join file's content for a client of s.
func joinOf(s *hub.Server) cluster.Join {
	return cluster.Join{URL: s.URL(), Token: s.Token(), CA: s.CA(), Protocol: 5, Build: "build"}
}
