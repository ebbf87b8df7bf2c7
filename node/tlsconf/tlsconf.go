// Package tlsconf holds a node's TLS material: its certificate and key and
// the CA it trusts for other nodes, reloaded when their files change (at
// most once a second, checked on a handshake) or on Reload (SIGHUP), so a
// renewed certificate takes effect without a restart.
//
// One Reloader gives both sides: Server for the node's HTTPS listener
// (API, dashboard, websocket, metrics, internal calls) and Client for its
// calls to other nodes. With mutual TLS the node presents its certificate
// on those calls, and the server asks every client for one (a client
// without one, such as a browser or the CLI, still connects; the node
// requires a verified one only on its internal endpoints: see
// VerifiedPeer).
package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chime-scheduler/chime/node/clock"
)

// Files names a node's TLS files (PEM).
type Files struct {
	Cert, Key string // the node's certificate chain and private key
	// CA is the bundle that signs the other nodes' certificates; empty
	// means the system roots (and no mutual TLS).
	CA string
	// Mutual makes the node present its certificate on calls to other
	// nodes and verify theirs against CA (VerifiedPeer).
	Mutual bool
}

// checkEvery bounds how often a handshake looks at the files' mtimes.
const checkEvery = time.Second

// Reloader serves the current TLS material of Files.
type Reloader struct {
	files Files
	cur   atomic.Pointer[material]

	clock     clock.Clock // clock.Real: when to look at the files again
	mu        sync.Mutex  // serializes reloads
	lastCheck time.Time
	errs      atomic.Uint64
}

// material is one loaded generation of the files.
type material struct {
	cert   *tls.Certificate
	pool   *x509.CertPool // nil: system roots
	stamp  string         // mtimes and sizes of the files, to notice a change
	server *tls.Config    // per-connection server config (GetConfigForClient)
}

// New loads f; an error names the file that failed.
func New(f Files) (*Reloader, error) {
	if f.Cert == "" || f.Key == "" {
		return nil, errors.New("tls: a certificate and a key are both needed (--tls-cert, --tls-key)")
	}
	if f.Mutual && f.CA == "" {
		return nil, errors.New("tls: mutual TLS between nodes needs the CA that signs their certificates (--tls-ca)")
	}
	r := &Reloader{files: f, clock: clock.Real}
	m, err := r.load()
	if err != nil {
		return nil, err
	}
	r.cur.Store(m)
	return r, nil
}

// stamp summarizes the files' mtimes and sizes.
func (r *Reloader) stamp() string {
	s := ""
	for _, p := range []string{r.files.Cert, r.files.Key, r.files.CA} {
		if p == "" {
			continue
		}
		if fi, err := os.Stat(p); err == nil {
			s += fmt.Sprintf("%d/%d;", fi.ModTime().UnixNano(), fi.Size())
		} else {
			s += "?;"
		}
	}
	return s
}

func (r *Reloader) load() (*material, error) {
	stamp := r.stamp()
	cert, err := tls.LoadX509KeyPair(r.files.Cert, r.files.Key)
	if err != nil {
		return nil, fmt.Errorf("tls: %s, %s: %w", r.files.Cert, r.files.Key, err)
	}
	if cert.Leaf == nil && len(cert.Certificate) > 0 {
		cert.Leaf, _ = x509.ParseCertificate(cert.Certificate[0])
	}
	m := &material{cert: &cert, stamp: stamp}
	if r.files.CA != "" {
		pem, err := os.ReadFile(r.files.CA)
		if err != nil {
			return nil, fmt.Errorf("tls: %w", err)
		}
		m.pool = x509.NewCertPool()
		if !m.pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls: %s holds no PEM certificate", r.files.CA)
		}
	}
	m.server = &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{cert},
		NextProtos:   []string{"http/1.1"},
	}
	if r.files.Mutual {
		// Ask, verify what is given; internal endpoints then require it.
		m.server.ClientAuth = tls.VerifyClientCertIfGiven
		m.server.ClientCAs = m.pool
	}
	return m, nil
}

// Reload reads the files again now. On an error the current material
// stays in use.
func (r *Reloader) Reload() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lastCheck = r.clock.Now()
	m, err := r.load()
	if err != nil {
		r.errs.Add(1)
		return err
	}
	r.cur.Store(m)
	return nil
}

// current returns the material, reloading it first when a file changed
// (looked at no more than once per checkEvery).
func (r *Reloader) current() *material {
	m := r.cur.Load()
	r.mu.Lock()
	if r.clock.Since(r.lastCheck) < checkEvery {
		r.mu.Unlock()
		return m
	}
	r.lastCheck = r.clock.Now()
	changed := r.stamp() != m.stamp
	r.mu.Unlock()
	if changed {
		if err := r.Reload(); err == nil {
			m = r.cur.Load()
		}
	}
	return m
}

// Certificate returns the node's current leaf certificate.
func (r *Reloader) Certificate() *x509.Certificate { return r.cur.Load().cert.Leaf }

// Server is the listener's config: every connection gets the current
// certificate (and, with mutual TLS, the current CA for client
// certificates).
func (r *Reloader) Server() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"http/1.1"},
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return r.current().server, nil
		},
	}
}

// Client is the config for calls to another node at host (the name or IP
// dialed, without the port): its certificate is verified against the
// current CA (the system roots without one) for host, and with mutual TLS
// this node's current certificate is presented.
func (r *Reloader) Client(host string) *tls.Config {
	c := &tls.Config{
		MinVersion: tls.VersionTLS12,
		ServerName: host,
		// The chain is verified below against the CA as it is now (it can
		// be reloaded), not against a pool fixed in this config; and for
		// host even when it is an IP (the handshake's ServerName is then
		// empty: IPs are not sent as SNI).
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			return verify(cs, r.current().pool, host)
		},
	}
	if r.files.Mutual {
		c.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return r.current().cert, nil
		}
	}
	return c
}

// verify checks a server's chain against pool (nil: system roots) for
// host.
func verify(cs tls.ConnectionState, pool *x509.CertPool, host string) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("tls: the peer sent no certificate")
	}
	if host == "" {
		return errors.New("tls: no host name to verify the peer's certificate for")
	}
	opts := x509.VerifyOptions{Roots: pool, DNSName: host, Intermediates: x509.NewCertPool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	for _, c := range cs.PeerCertificates[1:] {
		opts.Intermediates.AddCert(c)
	}
	_, err := cs.PeerCertificates[0].Verify(opts)
	return err
}

// VerifiedPeer reports whether r came over TLS with a client certificate
// that the listener verified against the CA (mutual TLS). Internal
// endpoints require it when the node runs mutual TLS.
func VerifiedPeer(r *http.Request) bool {
	return r.TLS != nil && len(r.TLS.VerifiedChains) > 0
}

// Mutual reports whether the node runs mutual TLS between nodes.
func (r *Reloader) Mutual() bool { return r.files.Mutual }

// Errors counts reloads that failed (the old material stayed in use).
func (r *Reloader) Errors() uint64 { return r.errs.Load() }
