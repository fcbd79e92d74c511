// Package certs generates the throwaway certificate authority and the
// server and client certificates of the secured local stack and of tests:
// ECDSA P-256 keys, written as PEM files readable by their owner only.
// Nothing here is for production; production certificates come from the
// operator's own CA.
package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// validity of every generated certificate.
const validity = 365 * 24 * time.Hour

// CA is a certificate authority that can issue certificates.
type CA struct {
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey
	PEM  []byte
}

// Pair is an issued certificate and its key, PEM encoded.
type Pair struct {
	CertPEM, KeyPEM []byte
}

// NewCA returns a fresh self-signed CA named name.
func NewCA(name string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("certs: CA key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: name, Organization: []string{"eventpipe local stack"}},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("certs: CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("certs: parse CA certificate: %w", err)
	}
	return &CA{Cert: cert, Key: key, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// LoadCA reads a CA written by WriteCA.
func LoadCA(certFile, keyFile string) (*CA, error) {
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("certs: load CA: %w", err)
	}
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, fmt.Errorf("certs: parse CA: %w", err)
	}
	key, ok := pair.PrivateKey.(*ecdsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("certs: CA key in %s is not ECDSA", keyFile)
	}
	return &CA{Cert: cert, Key: key, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw})}, nil
}

// Server issues a server certificate for hosts (DNS names or IP
// addresses).
func (ca *CA) Server(hosts ...string) (Pair, error) {
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: hosts[0]},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	return ca.issue(tmpl)
}

// Client issues a client certificate for mutual TLS with common name cn.
func (ca *CA) Client(cn string) (Pair, error) {
	return ca.issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: cn},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
}

func (ca *CA) issue(tmpl *x509.Certificate) (Pair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Pair{}, fmt.Errorf("certs: key: %w", err)
	}
	tmpl.SerialNumber = serial()
	tmpl.NotBefore = time.Now().Add(-time.Hour)
	tmpl.NotAfter = time.Now().Add(validity)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		return Pair{}, fmt.Errorf("certs: issue %s: %w", tmpl.Subject.CommonName, err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return Pair{}, fmt.Errorf("certs: encode key: %w", err)
	}
	return Pair{
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

// WriteCA writes the CA's certificate and key to dir/name.pem and
// dir/name-key.pem and returns their paths.
func (ca *CA) WriteCA(dir, name string) (certFile, keyFile string, err error) {
	keyDER, err := x509.MarshalECPrivateKey(ca.Key)
	if err != nil {
		return "", "", fmt.Errorf("certs: encode CA key: %w", err)
	}
	return Pair{CertPEM: ca.PEM, KeyPEM: pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})}.Write(dir, name)
}

// Write writes p to dir/name.pem and dir/name-key.pem (mode 0600, dir
// created 0700) and returns their paths.
func (p Pair) Write(dir, name string) (certFile, keyFile string, err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", "", fmt.Errorf("certs: %w", err)
	}
	certFile, keyFile = filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem")
	if err := os.WriteFile(certFile, p.CertPEM, 0o600); err != nil {
		return "", "", fmt.Errorf("certs: %w", err)
	}
	if err := os.WriteFile(keyFile, p.KeyPEM, 0o600); err != nil {
		return "", "", fmt.Errorf("certs: %w", err)
	}
	return certFile, keyFile, nil
}

// TLS returns p as a certificate for a tls.Config.
func (p Pair) TLS() (tls.Certificate, error) { return tls.X509KeyPair(p.CertPEM, p.KeyPEM) }

// Fingerprint returns the hex SHA-256 of the CA certificate's DER bytes,
// the form Elasticsearch clients pin (CertificateFingerprint).
func (ca *CA) Fingerprint() string {
	sum := sha256.Sum256(ca.Cert.Raw)
	return hex.EncodeToString(sum[:])
}

// Pool returns a certificate pool holding only the CA.
func (ca *CA) Pool() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	return pool
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 126))
	if err != nil {
		panic(fmt.Sprintf("certs: serial: %v", err))
	}
	return n
}

// Files are a fresh CA and a server certificate it issued, written to a
// folder: what a TLS server of a test or of the secured stack needs.
type Files struct {
	CA *CA
	// CAFile, CertFile and KeyFile are dir/ca.pem, dir/server.pem and
	// dir/server-key.pem.
	CAFile, CertFile, KeyFile string
	// Cert is the server certificate, ready for a tls.Config.
	Cert tls.Certificate
}

// WriteServer makes a CA named name and a server certificate for hosts,
// and writes them to dir.
func WriteServer(dir, name string, hosts ...string) (Files, error) {
	ca, err := NewCA(name)
	if err != nil {
		return Files{}, err
	}
	f := Files{CA: ca}
	if f.CAFile, _, err = ca.WriteCA(dir, "ca"); err != nil {
		return Files{}, err
	}
	server, err := ca.Server(hosts...)
	if err != nil {
		return Files{}, err
	}
	if f.CertFile, f.KeyFile, err = server.Write(dir, "server"); err != nil {
		return Files{}, err
	}
	if f.Cert, err = server.TLS(); err != nil {
		return Files{}, fmt.Errorf("certs: %w", err)
	}
	return f, nil
}
