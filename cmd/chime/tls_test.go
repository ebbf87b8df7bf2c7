package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chime-scheduler/chime/node/tlsconf"
	"github.com/chime-scheduler/chime/slots"
)

// TestTLSCluster runs 3 chime processes with HTTPS and mutual TLS between
// them, from certificates the test makes: 600 tasks created through one
// node (about two thirds forwarded over TLS), a listing across all three,
// a SIGKILL of one owner; every task fires exactly once, none early. Plain
// HTTP to a node, a call between nodes without a client certificate, and a
// client that does not trust the CA are refused; a renewed certificate is
// served after SIGHUP without a restart.
func TestTLSCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	dir := t.TempDir()
	files, err := tlsconf.WriteDev(dir, "node", []string{"127.0.0.1", "localhost"})
	if err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(files.CA)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	// The helpers use http.DefaultClient: let it trust the test CA.
	tr := http.DefaultTransport.(*http.Transport)
	saved := tr.TLSClientConfig
	tr.TLSClientConfig = &tls.Config{RootCAs: pool}
	t.Cleanup(func() { tr.TLSClientConfig = saved; tr.CloseIdleConnections() })

	procs := startCluster(t, 3, "--tls-cert", files.Cert, "--tls-key", files.Key, "--tls-ca", files.CA, "--tls-mutual")
	for _, p := range procs {
		if !strings.HasPrefix(p.url, "https://") {
			t.Fatalf("node serves %s, want https", p.url)
		}
	}
	fl := newFireLog(t)
	cv, err := getClusterRanges(procs[0].url)
	if err != nil {
		t.Fatal(err)
	}
	owners := ownerOf(t, cv)

	// Refusals: plain HTTP, a client without the CA, a call between nodes
	// without a client certificate (signed, from a member).
	plain := "http://" + strings.TrimPrefix(procs[0].url, "https://")
	if resp, err := http.Get(plain + "/readyz"); err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode < 400 {
			t.Errorf("plain HTTP to a TLS node = %d %q", resp.StatusCode, b)
		}
	}
	strict := &http.Client{Transport: &http.Transport{}, Timeout: 5 * time.Second}
	if _, err := strict.Get(procs[0].url + "/readyz"); err == nil {
		t.Error("a client that does not trust the cluster's CA connected")
	}
	req, _ := http.NewRequest("GET", procs[0].url+"/internal/v1/member", nil)
	signCall(req, testClusterSecret, "n2", "n1", nil, time.Now())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || !bytes.Contains(b, []byte("client certificate")) {
		t.Errorf("a signed internal call without a client certificate = %d %s; want 401 naming the certificate", resp.StatusCode, b)
	}

	// 600 tasks through n1, due in 5-8 s.
	const n = 600
	due := time.Now().Add(5 * time.Second)
	var tasks []map[string]any
	perOwner := map[string]int{}
	for i := range n {
		id := fmt.Sprintf("tls-%d", i)
		perOwner[owners[slots.Of(id)]]++
		tasks = append(tasks, map[string]any{"id": id, "callback_url": fl.srv.URL,
			"due_at": due.Add(time.Duration(i*5) * time.Millisecond).Format(time.RFC3339Nano)})
	}
	createAll(t, procs[0].url, tasks)
	if perOwner["n2"] == 0 || perOwner["n3"] == 0 {
		t.Fatalf("tasks per owner %v: nothing was forwarded", perOwner)
	}
	// A listing without a query string, merged from every member.
	var page struct {
		Tasks []struct{ ID string } `json:"tasks"`
	}
	if code := getJSON(t, procs[2].url+"/v1/tasks", &page); code != 200 || len(page.Tasks) != 100 {
		t.Errorf("listing over TLS = %d with %d tasks, want 200 with a full page of 100", code, len(page.Tasks))
	}

	// Renewal: a new certificate on disk, SIGHUP, served at once.
	old := servedSerial(t, procs[0].url, pool)
	if _, err := tlsconf.WriteDev(dir, "node", []string{"127.0.0.1", "localhost"}); err != nil {
		t.Fatal(err)
	}
	if err := procs[0].cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for servedSerial(t, procs[0].url, pool) == old {
		if time.Now().After(deadline) {
			t.Fatalf("n1 still serves the old certificate 10 s after SIGHUP:\n%s", procs[0].log())
		}
		time.Sleep(100 * time.Millisecond)
	}

	// Failover over TLS: n3 dies before the first due time.
	procs[2].signal(t, syscall.SIGKILL)
	fl.awaitCount(n, 40*time.Second)
	time.Sleep(time.Second)
	fl.mu.Lock()
	defer fl.mu.Unlock()
	dups, early := 0, 0
	for _, fs := range fl.got {
		d, e := tally(fs)
		dups, early = dups+d, early+e
	}
	if len(fl.got) != n || early > 0 {
		t.Errorf("%d of %d tasks fired (n3 owned %d), %d early", len(fl.got), n, perOwner["n3"], early)
	}
	t.Logf("all %d fired over a TLS cluster with n3 killed; %d repeated deliveries of one fire id", len(fl.got), dups)
}

// servedSerial returns the serial number of the certificate url serves.
func servedSerial(t *testing.T, url string, pool *x509.CertPool) string {
	t.Helper()
	c, err := tls.Dial("tcp", strings.TrimPrefix(url, "https://"), &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].SerialNumber.String()
}

// getJSON GETs url with http.DefaultClient and decodes a JSON answer into
// out; it returns the status.
func getJSON(t *testing.T, url string, out any) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return resp.StatusCode
}
