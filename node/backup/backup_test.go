package backup

import (
	"archive/tar"
	"compress/gzip"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestOneBackupAtATime: while a backup streams, a second one is refused
// with 409; the first completes with every file and its manifest, and its
// checkpoint is removed. An in-memory store is refused with 400.
func TestOneBackupAtATime(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	if err := os.Mkdir(data, 0o755); err != nil {
		t.Fatal(err)
	}
	started, release := make(chan struct{}), make(chan struct{})
	h := New(Config{Node: "n1", DataDir: data, Now: time.Now, Log: slog.New(slog.DiscardHandler),
		Checkpoint: func(dir string) error {
			close(started)
			<-release
			if err := os.Mkdir(dir, 0o755); err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(dir, "MANIFEST-000001"), []byte("data"), 0o644)
		}})
	first := make(chan *httptest.ResponseRecorder)
	go func() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/admin/backup", nil))
		first <- rec
	}()
	<-started
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/admin/backup", nil))
	if rec.Code != http.StatusConflict {
		t.Errorf("second backup while one runs: %d %s", rec.Code, rec.Body)
	}
	close(release)
	rec = <-first
	if rec.Code != http.StatusOK {
		t.Fatalf("backup: %d %s", rec.Code, rec.Body)
	}
	gz, err := gzip.NewReader(rec.Body)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	var names []string
	var man Manifest
	for {
		hd, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, hd.Name)
		if hd.Name == BackupManifestName {
			if err := json.NewDecoder(tr).Decode(&man); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(names) != 2 || names[1] != BackupManifestName || man.Node != "n1" || len(man.Files) != 1 || man.Files[0].Size != 4 {
		t.Fatalf("archive %v, manifest %+v", names, man)
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(data), ".*-backup-*")); len(left) > 0 {
		t.Errorf("checkpoints left behind: %v", left)
	}

	mem := New(Config{Node: "n1", InMemory: true})
	rec = httptest.NewRecorder()
	mem.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/admin/backup", nil))
	if rec.Code != http.StatusBadRequest {
		t.Errorf("backup of an in-memory store: %d %s", rec.Code, rec.Body)
	}
}
