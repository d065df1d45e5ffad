package hub

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
	"strings"
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

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 126))
	return n
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
		return nil, fmt.Errorf("hub: this host's addresses: %w", err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && !n.IP.IsLinkLocalUnicast() {
			names = append(names, n.IP.String())
		}
	}
	if h, err := os.Hostname(); err == nil && h != "" {
		names = append([]string{h}, names...)
	}
	if len(names) == 0 {
		return nil, errors.New("hub: this host has no address other than loopback")
	}
	return names, nil
}

// ownCert is a certificate given with TLSFiles, ready to serve: what the
// join file carries for a worker to trust (trust), and the name of the
// listen host it covers, which the join file's URL gives.
type ownCert struct {
	cert  tls.Certificate
	trust []byte
	name  string
}

// loadCert reads the certificate of certFile and the key of keyFile and
// checks that they go together, that the certificate is valid now, and that
// it covers host (the listen address's; for an unspecified one, a name or
// address of this host).
func loadCert(certFile, keyFile, host string) (*ownCert, error) {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return nil, fmt.Errorf("hub: TLS certificate: %w", err)
	}
	var trust []byte
	var leaf *x509.Certificate
	for rest := certPEM; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("hub: TLS certificate %s: %w", certFile, err)
		}
		if leaf == nil {
			leaf = c
		}
		trust = append(trust, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: b.Bytes})...)
	}
	if leaf == nil {
		return nil, fmt.Errorf("hub: TLS certificate %s: no PEM certificate in it", certFile)
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, fmt.Errorf("hub: TLS key: %w", err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("hub: TLS key %s and certificate %s: %w", keyFile, certFile, err)
	}
	now := time.Now()
	if now.Before(leaf.NotBefore) || now.After(leaf.NotAfter) {
		return nil, fmt.Errorf("hub: TLS certificate %s: valid from %s to %s, not now",
			certFile, leaf.NotBefore.UTC().Format(time.RFC3339), leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	names, err := listenNames(host)
	if err != nil {
		return nil, err
	}
	for _, n := range names {
		if leaf.VerifyHostname(n) == nil {
			return &ownCert{cert: cert, trust: trust, name: n}, nil
		}
	}
	return nil, fmt.Errorf("hub: TLS certificate %s covers %s, not %s", certFile, covers(leaf), strings.Join(names, " or "))
}

// covers says which names and addresses c is valid for.
func covers(c *x509.Certificate) string {
	var names []string
	names = append(names, c.DNSNames...)
	for _, ip := range c.IPAddresses {
		names = append(names, ip.String())
	}
	if len(names) == 0 {
		return "no host name or address (a common name alone does not count)"
	}
	return strings.Join(names, ", ")
}
