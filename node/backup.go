package node

// GET /v1/admin/backup: an online, consistent copy of this node's store (a
// Pebble checkpoint) streamed as a tar.gz archive. README "Backups and
// export" describes the archive; cmd/chime restore reads it.

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

// BackupManifestName is the last entry of a backup archive: a JSON
// BackupManifest that lists every other entry with its size and SHA-256.
// An archive without it (cut short) is incomplete.
const BackupManifestName = "CHIME-BACKUP.json"

// BackupManifest describes one node's backup archive.
type BackupManifest struct {
	Format    int          `json:"format"` // 1
	Node      string       `json:"node"`
	CreatedAt string       `json:"created_at"` // when the checkpoint was taken (RFC 3339)
	Files     []BackupFile `json:"files"`
}

// BackupFile is one file of the store in a backup archive.
type BackupFile struct {
	Name   string `json:"name"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

func (n *Node) handleBackup(w http.ResponseWriter, r *http.Request) {
	if n.cfg.InMemory || n.cfg.Mem != nil {
		writeError(w, &Error{Code: CodeInvalidArgument, Message: "this node's store is in memory: there is nothing on disk to back up"})
		return
	}
	if !n.backupMu.TryLock() {
		writeError(w, &Error{Code: CodeConflict, Message: "a backup of this node is already running"})
		return
	}
	defer n.backupMu.Unlock()
	tmp, err := backupTempDir(n.cfg.DataDir)
	if err != nil {
		writeError(w, &Error{Code: CodeInternal, Message: "backup: " + err.Error()})
		return
	}
	defer func() {
		if err := os.RemoveAll(tmp); err != nil {
			n.log.Error("backup: removing the checkpoint", "dir", tmp, "err", err)
		}
	}()
	dir := filepath.Join(tmp, "checkpoint")
	at := n.now()
	if err := n.store.Checkpoint(dir); err != nil {
		writeError(w, asError(err))
		return
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		writeError(w, &Error{Code: CodeInternal, Message: "backup: " + err.Error()})
		return
	}
	w.Header().Set("Content-Type", "application/gzip")
	w.Header().Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", n.cfg.Name+".tar.gz"))
	w.WriteHeader(http.StatusOK)
	man := BackupManifest{Format: 1, Node: n.cfg.Name, CreatedAt: at.UTC().Format(time.RFC3339Nano)}
	if err := writeBackup(w, dir, entries, &man, n.now); err != nil {
		// The status is sent: cut the stream, so the client sees an
		// archive without its manifest rather than a short one that looks whole.
		n.log.Error("backup: streaming the archive", "err", err)
		panic(http.ErrAbortHandler)
	}
	n.log.Info("backup streamed", "files", len(man.Files), "checkpoint_at", man.CreatedAt)
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
func writeBackup(w io.Writer, dir string, entries []os.DirEntry, man *BackupManifest, now func() time.Time) error {
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
		man.Files = append(man.Files, BackupFile{Name: e.Name(), Size: st.Size(), SHA256: hex.EncodeToString(h.Sum(nil))})
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
