package tlsconf

import (
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// serve runs an HTTPS server on loopback with r's server config; its
// handler answers "peer" when the client presented a verified certificate.
func serve(t *testing.T, r *Reloader) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if VerifiedPeer(req) {
			io.WriteString(w, "peer "+req.TLS.VerifiedChains[0][0].Subject.CommonName)
			return
		}
		io.WriteString(w, "anonymous")
	})}
	go srv.Serve(tls.NewListener(ln, r.Server()))
	t.Cleanup(func() { srv.Close() })
	return "https://" + ln.Addr().String()
}

func get(c *tls.Config, url string) (string, *tls.ConnectionState, error) {
	cl := &http.Client{Transport: &http.Transport{TLSClientConfig: c}, Timeout: 5 * time.Second}
	defer cl.CloseIdleConnections()
	resp, err := cl.Get(url)
	if err != nil {
		return "", nil, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b), resp.TLS, nil
}

func TestMutualTLSAndReload(t *testing.T) {
	dir := t.TempDir()
	hosts := []string{"127.0.0.1", "localhost"}
	f1, err := WriteDev(dir, "n1", hosts)
	if err != nil {
		t.Fatal(err)
	}
	f2, err := WriteDev(dir, "n2", hosts)
	if err != nil {
		t.Fatal(err)
	}
	f1.Mutual, f2.Mutual = true, true
	r1, err := New(f1)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := New(f2)
	if err != nil {
		t.Fatal(err)
	}
	url := serve(t, r1)

	// n2 calls n1: both verified.
	body, _, err := get(r2.Client("127.0.0.1"), url)
	if err != nil || body != "peer n2" {
		t.Fatalf("n2 -> n1 = %q, %v; want a verified peer n2", body, err)
	}
	// A client with no certificate (a browser, the CLI) still connects,
	// anonymously.
	plain, err := New(Files{Cert: f2.Cert, Key: f2.Key, CA: f2.CA})
	if err != nil {
		t.Fatal(err)
	}
	if body, _, err := get(plain.Client("127.0.0.1"), url); err != nil || body != "anonymous" {
		t.Errorf("no client cert = %q, %v; want anonymous", body, err)
	}
	// Another CA's node is refused both ways.
	other, err := WriteDev(t.TempDir(), "x", hosts)
	if err != nil {
		t.Fatal(err)
	}
	other.Mutual = true
	rx, err := New(other)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := get(rx.Client("127.0.0.1"), url); err == nil {
		t.Error("a client trusting another CA accepted n1's certificate")
	}
	xurl := serve(t, rx)
	if _, _, err := get(r2.Client("127.0.0.1"), xurl); err == nil {
		t.Error("n2 accepted a server certificate of another CA")
	}
	// A name or an IP the certificate does not hold is refused.
	for _, host := range []string{"n9.example", "127.0.0.2", ""} {
		if _, _, err := get(r2.Client(host), url); err == nil {
			t.Errorf("n2 accepted n1's certificate for %q, which it does not hold", host)
		}
	}

	// Renewal: the files change; the next handshake after checkEvery
	// serves the new certificate, without a restart.
	old := r1.Certificate().SerialNumber
	if _, err := WriteDev(dir, "n1", hosts); err != nil {
		t.Fatal(err)
	}
	future := time.Now().Add(time.Minute)
	os.Chtimes(f1.Cert, future, future) // a renewal within the same mtime tick still counts
	r1.mu.Lock()
	r1.lastCheck = time.Time{}
	r1.mu.Unlock()
	_, cs, err := get(r2.Client("127.0.0.1"), url)
	if err != nil {
		t.Fatal(err)
	}
	if got := cs.PeerCertificates[0].SerialNumber; got.Cmp(old) == 0 || got.Cmp(r1.Certificate().SerialNumber) != 0 {
		t.Errorf("after renewal the server presents serial %v; old %v, loaded %v", got, old, r1.Certificate().SerialNumber)
	}

	// A broken file: Reload fails, the current material stays.
	cur := r1.Certificate().SerialNumber
	if err := os.WriteFile(f1.Cert, []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := r1.Reload(); err == nil || r1.Errors() != 1 {
		t.Errorf("Reload of a garbage cert = %v, errors %d", err, r1.Errors())
	}
	if _, cs, err := get(r2.Client("127.0.0.1"), url); err != nil || cs.PeerCertificates[0].SerialNumber.Cmp(cur) != 0 {
		t.Errorf("after a failed reload: %v; want the last good certificate", err)
	}
}

func TestNewRefuses(t *testing.T) {
	dir := t.TempDir()
	f, err := WriteDev(dir, "n1", []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	junk := filepath.Join(dir, "junk.pem")
	os.WriteFile(junk, []byte("not pem"), 0o600)
	for _, tt := range []struct {
		name string
		f    Files
		want string
	}{
		{"no key", Files{Cert: f.Cert}, "a certificate and a key"},
		{"mutual without CA", Files{Cert: f.Cert, Key: f.Key, Mutual: true}, "--tls-ca"},
		{"key of another cert", Files{Cert: f.Cert, Key: filepath.Join(dir, "ca-key.pem")}, "private key does not match"},
		{"missing file", Files{Cert: f.Cert + ".nope", Key: f.Key}, "no such file"},
		{"CA not PEM", Files{Cert: f.Cert, Key: f.Key, CA: junk}, "no PEM certificate"},
	} {
		if _, err := New(tt.f); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: New = %v, want an error containing %q", tt.name, err, tt.want)
		}
	}
	for _, p := range []string{f.Key, filepath.Join(dir, "ca-key.pem")} {
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v %v, want mode 0600", p, fi.Mode(), err)
		}
	}
}
