package node

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/chime-scheduler/chime/node/backup"
)

// TestBackupEndpoint: GET /v1/admin/backup needs the token, streams a
// tar.gz of the store's files ending with a manifest that lists each with
// its size and SHA-256, and leaves no checkpoint behind (node/backup
// tests that a second backup is refused while one runs).
func TestBackupEndpoint(t *testing.T) {
	tn := startNode(t, func(c *Config) { c.APIToken = "s3cret" })
	auth := []string{"Authorization", "Bearer s3cret"}
	if code := tn.do(t, "POST", "/v1/tasks", `{"id":"a","callback_url":"http://127.0.0.1:9/","delay_ms":600000}`, nil, auth...); code != 201 {
		t.Fatalf("create: %d", code)
	}
	var eb errorBody
	if code := tn.do(t, "GET", "/v1/admin/backup", nil, &eb); code != 401 || eb.Error.Code != CodeUnauthenticated {
		t.Fatalf("backup without the token: %d %+v", code, eb.Error)
	}

	req, _ := http.NewRequest("GET", tn.url("/v1/admin/backup"), nil)
	req.Header.Set(auth[0], auth[1])
	resp, err := tn.client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/gzip" {
		t.Fatalf("backup: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	gz, err := gzip.NewReader(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	sums := map[string]string{}
	var man *backup.Manifest
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if h.Name == backup.BackupManifestName {
			man = &backup.Manifest{}
			if err := json.Unmarshal(b, man); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if h.Typeflag != tar.TypeReg || filepath.Base(h.Name) != h.Name {
			t.Errorf("entry %q of type %q", h.Name, h.Typeflag)
		}
		s := sha256.Sum256(b)
		sums[h.Name] = hex.EncodeToString(s[:])
	}
	if man == nil || man.Format != 1 || man.Node != "test-node" || len(man.Files) != len(sums) || len(sums) < 3 {
		t.Fatalf("manifest %+v for %d files", man, len(sums))
	}
	for _, f := range man.Files {
		if sums[f.Name] != f.SHA256 {
			t.Errorf("file %s: sha256 %s, manifest says %s", f.Name, sums[f.Name], f.SHA256)
		}
	}
	left, _ := filepath.Glob(filepath.Join(filepath.Dir(tn.cfg.DataDir), ".*-backup-*"))
	if len(left) > 0 {
		t.Errorf("checkpoints left behind: %v", left)
	}
	if _, err := os.Stat(tn.cfg.DataDir); err != nil {
		t.Fatal(err)
	}
}
