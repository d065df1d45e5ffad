package cluster

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"time"
)

// certValidity is how long a pool's certificates are valid: a pool that
// runs longer needs certificates of its own.
const certValidity = 30 * 24 * time.Hour

// poolCerts makes a certificate authority for one pool and a server
// certificate it signs for names (host names and IP addresses): the server
// presents the latter, and a worker, which finds the authority in the join
// file, trusts it and nothing else.
func poolCerts(names []string) (server tls.Certificate, caPEM []byte, err error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return server, nil, err
	}
	now := time.Now()
	ca := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "poolrun pool authority"},
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              now.Add(certValidity),
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return server, nil, err
	}
	ca, err = x509.ParseCertificate(caDER)
	if err != nil {
		return server, nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return server, nil, err
	}
	leaf := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: "poolrun pool"},
		NotBefore:    now.Add(-time.Minute),
		NotAfter:     now.Add(certValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, n := range names {
		if ip := net.ParseIP(n); ip != nil {
			leaf.IPAddresses = append(leaf.IPAddresses, ip)
		} else {
			leaf.DNSNames = append(leaf.DNSNames, n)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, leaf, ca, &key.PublicKey, caKey)
	if err != nil {
		return server, nil, err
	}
	server = tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	return server, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), nil
}

var osHostname = os.Hostname

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 126))
	return n
}

// clientTLS is what a client of a pool whose authority is caPEM uses.
func clientTLS(caPEM string) (*tls.Config, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM([]byte(caPEM)) {
		return nil, errors.New("cluster: the join file's ca holds no certificate")
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}

// listenNames returns the names a server listening on host is reached by:
// host itself, or, for an unspecified address (0.0.0.0, ::), this host's
// name and the addresses of its interfaces. The first is the one the join
// file gives.
func listenNames(host string) ([]string, error) {
	ip := net.ParseIP(host)
	if host != "" && (ip == nil || !ip.IsUnspecified()) {
		return []string{host}, nil
	}
	var names []string
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, fmt.Errorf("cluster: this host's addresses: %w", err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && !n.IP.IsLinkLocalUnicast() {
			names = append(names, n.IP.String())
		}
	}
	if h, err := osHostname(); err == nil && h != "" {
		names = append([]string{h}, names...)
	}
	if len(names) == 0 {
		return nil, errors.New("cluster: this host has no address other than loopback")
	}
	return names, nil
}
