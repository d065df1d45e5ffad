package cluster

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
)

// clientTLS is what a client of a pool whose authority is caPEM uses.
func clientTLS(caPEM string) (*tls.Config, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM([]byte(caPEM)) {
		return nil, errors.New("cluster: the join file's ca holds no certificate")
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}
