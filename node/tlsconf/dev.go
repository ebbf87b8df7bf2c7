package tlsconf

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/chime-scheduler/chime/node/clock"
)

// WriteDev makes TLS files for a development cluster in dir: a CA
// (ca.pem, ca-key.pem), made on first use and reused after, and a
// certificate for name (name.pem, name-key.pem) signed by it, valid for
// hosts (IP addresses or DNS names) for a year, usable by a server and a
// client (mutual TLS). Keys are ECDSA P-256, written with mode 0600.
// `chime certs` and scripts/cluster.sh (CHIME_TLS=1) use it; production
// certificates come from the operator's own CA.
func WriteDev(dir, name string, hosts []string) (Files, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return Files{}, err
	}
	caCert, caKey, err := devCA(dir)
	if err != nil {
		return Files{}, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Files{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: name, Organization: []string{"Chime development"}},
		NotBefore:    clock.Real.Now().Add(-time.Hour),
		NotAfter:     clock.Real.Now().Add(365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else if h != "" {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		return Files{}, err
	}
	f := Files{Cert: filepath.Join(dir, name+".pem"), Key: filepath.Join(dir, name+"-key.pem"), CA: filepath.Join(dir, "ca.pem")}
	if err := writePEM(f.Key, "EC PRIVATE KEY", ecKey(key)); err != nil {
		return Files{}, err
	}
	return f, writePEM(f.Cert, "CERTIFICATE", der)
}

// devCA loads dir's CA, making it first if there is none.
func devCA(dir string) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	certPath, keyPath := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "ca-key.pem")
	if certPEM, err := os.ReadFile(certPath); err == nil {
		keyPEM, err := os.ReadFile(keyPath)
		if err != nil {
			return nil, nil, err
		}
		cb, kb := pemBlock(certPEM), pemBlock(keyPEM)
		if cb == nil || kb == nil {
			return nil, nil, fmt.Errorf("tls: %s or %s is not PEM", certPath, keyPath)
		}
		cert, err := x509.ParseCertificate(cb)
		if err != nil {
			return nil, nil, err
		}
		key, err := x509.ParseECPrivateKey(kb)
		return cert, key, err
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "Chime development CA", Organization: []string{"Chime development"}},
		NotBefore:             clock.Real.Now().Add(-time.Hour),
		NotAfter:              clock.Real.Now().Add(10 * 365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	if err := writePEM(keyPath, "EC PRIVATE KEY", ecKey(key)); err != nil {
		return nil, nil, err
	}
	if err := writePEM(certPath, "CERTIFICATE", der); err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	return cert, key, err
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	return n
}

func ecKey(k *ecdsa.PrivateKey) []byte {
	b, _ := x509.MarshalECPrivateKey(k)
	return b
}

func pemBlock(b []byte) []byte {
	if p, _ := pem.Decode(b); p != nil {
		return p.Bytes
	}
	return nil
}

// writePEM writes one PEM block to path (mode 0600) through a temporary
// file and a rename, so a reloading node never reads half a file.
func writePEM(path, typ string, der []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
