// Package backup serves GET /v1/admin/backup: an online, consistent copy
// of a node's store (a Pebble checkpoint) streamed as a tar.gz archive
// whose last entry is a manifest. README "Backups and export" describes
// the archive; cmd/chime restore reads it. The handler reaches the node
// only through the Config it is built with.
package backup

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/chime-scheduler/chime/node/httpapi"
)

// BackupManifestName is the last entry of a backup archive: a JSON
// Manifest that lists every other entry with its size and SHA-256. An
// archive without it (cut short) is incomplete. (It keeps the name it had
// in package node.)
const BackupManifestName = "CHIME-BACKUP.json"

// Manifest describes one node's backup archive.
type Manifest struct {
	Format    int    `json:"format"` // 1
	Node      string `json:"node"`
	CreatedAt string `json:"created_at"` // when the checkpoint was taken (RFC 3339)
	Files     []File `json:"files"`
}

// File is one file of the store in a backup archive.
type File struct {
	Name   string `json:"name"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// Config is the node as the backup handler sees it.
type Config struct {
	Node     string // the node's name: the archive's and the manifest's
	DataDir  string // where the store lives; the checkpoint goes next to it
	InMemory bool   // the store is in memory: there is nothing to back up
	// Checkpoint writes a consistent copy of the store's files into dir,
	// which it creates (storage.Store.Checkpoint).
	Checkpoint func(dir string) error
	Now        func() time.Time
	Log        *slog.Logger
}

// Handler serves GET /v1/admin/backup, one backup at a time.
type Handler struct {
	cfg Config
	mu  sync.Mutex // held while a checkpoint streams
}

// New builds the handler.
func New(cfg Config) *Handler { return &Handler{cfg: cfg} }

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h.cfg.InMemory {
		httpapi.WriteError(w, &httpapi.Error{Code: httpapi.CodeInvalidArgument, Message: "this node's store is in memory: there is nothing on disk to back up"})
		return
	}
	if !h.mu.TryLock() {
		httpapi.WriteError(w, &httpapi.Error{Code: httpapi.CodeConflict, Message: "a backup of this node is already running"})
		return
	}
	defer h.mu.Unlock()
	tmp, err := backupTempDir(h.cfg.DataDir)
	if err != nil {
		httpapi.WriteError(w, &httpapi.Error{Code: httpapi.CodeInternal, Message: "backup: " + err.Error()})
		return
	}
	defer func() {
		if err := os.RemoveAll(tmp); err != nil {
			h.cfg.Log.Error("backup: removing the checkpoint", "dir", tmp, "err", err)
		}
	}()
	dir := filepath.Join(tmp, "checkpoint")
	at := h.cfg.Now()
	if err := h.cfg.Checkpoint(dir); err != nil {
		httpapi.WriteError(w, httpapi.AsError(err))
		return
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		httpapi.WriteError(w, &httpapi.Error{Code: httpapi.CodeInternal, Message: "backup: " + err.Error()})
		return
	}
	w.Header().Set("Content-Type", "application/gzip")
	w.Header().Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", h.cfg.Node+".tar.gz"))
	w.WriteHeader(http.StatusOK)
	man := Manifest{Format: 1, Node: h.cfg.Node, CreatedAt: at.UTC().Format(time.RFC3339Nano)}
	if err := writeBackup(w, dir, entries, &man, h.cfg.Now); err != nil {
		// The status is sent: cut the stream, so the client sees an
		// archive without its manifest rather than a short one that looks whole.
		h.cfg.Log.Error("backup: streaming the archive", "err", err)
		panic(http.ErrAbortHandler)
	}
	h.cfg.Log.Info("backup streamed", "files", len(man.Files), "checkpoint_at", man.CreatedAt)
}

// backupTempDir makes a directory for a checkpoint next to the data dir
// (same filesystem: the checkpoint hard-links instead of copying), or in
// the system's temporary directory when the data dir's parent is not
// writable.
func backupTempDir(dataDir string) (string, error) {
	abs, err := filepath.Abs(dataDir)
	if err != nil {
		return "", err
	}
	if d, err := os.MkdirTemp(filepath.Dir(abs), "."+filepath.Base(abs)+"-backup-"); err == nil {
		return d, nil
	}
	return os.MkdirTemp("", "chime-backup-")
}

// writeBackup writes the files of dir (the checkpoint's entries; Pebble
// writes a flat directory) as a tar.gz to w, then the manifest.
func writeBackup(w io.Writer, dir string, entries []os.DirEntry, man *Manifest, now func() time.Time) error {
	gz := gzip.NewWriter(w)
	tw := tar.NewWriter(gz)
	for _, e := range entries {
		if !e.Type().IsRegular() {
			return fmt.Errorf("checkpoint entry %s is not a regular file", e.Name())
		}
		f, err := os.Open(filepath.Join(dir, e.Name()))
		if err != nil {
			return err
		}
		st, err := f.Stat()
		if err != nil {
			f.Close()
			return err
		}
		h := sha256.New()
		err = tw.WriteHeader(&tar.Header{Name: e.Name(), Mode: 0o644, Size: st.Size(), ModTime: st.ModTime(), Typeflag: tar.TypeReg, Format: tar.FormatPAX})
		if err == nil {
			_, err = io.Copy(io.MultiWriter(tw, h), io.LimitReader(f, st.Size()))
		}
		f.Close()
		if err != nil {
			return err
		}
		man.Files = append(man.Files, File{Name: e.Name(), Size: st.Size(), SHA256: hex.EncodeToString(h.Sum(nil))})
	}
	b, err := json.Marshal(man)
	if err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Name: BackupManifestName, Mode: 0o644, Size: int64(len(b)), ModTime: now(), Typeflag: tar.TypeReg, Format: tar.FormatPAX}); err != nil {
		return err
	}
	if _, err := tw.Write(b); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return gz.Close()
}
