package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chime-scheduler/chime/node/backup"
)

// TestBackupRestoreFiresEveryTaskOnce backs up a node holding 500 tasks due
// a few seconds ahead, stops it, restores the archive into a new data dir
// and starts a node from it: every task fires exactly once, none early.
func TestBackupRestoreFiresEveryTaskOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("runs chime processes")
	}
	parallelProcs(t, 1)
	const n = 500
	fl := newFireLog(t)
	src := startChime(t, t.TempDir())
	due := time.Now().Add(6 * time.Second)
	var tasks []map[string]any
	for i := range n {
		tk := map[string]any{"id": fmt.Sprintf("bk-%03d", i), "callback_url": fl.srv.URL}
		if i%2 == 0 {
			tk["due_at"] = due.Add(time.Duration(i) * time.Millisecond).UTC().Format(time.RFC3339Nano)
		} else {
			tk["delay_ms"] = 6000 + i
		}
		tasks = append(tasks, tk)
	}
	start := time.Now()
	createAll(t, src.url, tasks)

	out := filepath.Join(t.TempDir(), "backup")
	stdout, stderr, err := runBin(t, "", "backup", "--addr", src.url, "--out", out)
	if err != nil {
		t.Fatalf("backup: %v\n%s%s", err, stdout, stderr)
	}
	src.signal(t, syscall.SIGTERM)
	t.Logf("created and backed up in %v: %s", time.Since(start).Round(time.Millisecond), strings.TrimSpace(stdout))
	if time.Now().After(due) {
		t.Fatal("too slow: the tasks fell due before the node stopped")
	}
	if fl.count() != 0 {
		t.Fatalf("%d tasks fired before the restore", fl.count())
	}

	var man backupManifest
	b, err := os.ReadFile(filepath.Join(out, "manifest.json"))
	if err == nil {
		err = json.Unmarshal(b, &man)
	}
	if err != nil || len(man.Members) != 1 || len(man.Archives) != 1 || man.TableChanged || !man.Settled {
		t.Fatalf("manifest %s: %v", b, err)
	}
	archive := filepath.Join(out, man.Archives[0].File)
	ab, err := os.ReadFile(archive)
	if err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256(ab); hex.EncodeToString(sum[:]) != man.Archives[0].SHA256 || int64(len(ab)) != man.Archives[0].Bytes {
		t.Fatalf("archive %s does not match the manifest %+v", archive, man.Archives[0])
	}
	leftovers, _ := filepath.Glob(filepath.Join(filepath.Dir(src.dataDir), ".*-backup-*"))
	if len(leftovers) > 0 {
		t.Errorf("checkpoint directories left behind: %v", leftovers)
	}

	// A non-empty data dir is refused; a new one is made.
	busy := t.TempDir()
	if err := os.WriteFile(filepath.Join(busy, "x"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, stderr, err := runBin(t, "", "restore", "--from", archive, "--data-dir", busy); err == nil || !strings.Contains(stderr, "not empty") {
		t.Errorf("restore into a non-empty dir: %v %s", err, stderr)
	}
	dir := filepath.Join(t.TempDir(), "restored")
	if stdout, stderr, err := runBin(t, "", "restore", "--from", archive, "--data-dir", dir); err != nil ||
		!strings.Contains(stdout, "verified against its own manifest and manifest.json") {
		t.Fatalf("restore: %v\n%s%s", err, stdout, stderr)
	}

	startChime(t, dir)
	fl.awaitCount(n, 30*time.Second)
	time.Sleep(time.Second) // room for a repeat
	fl.mu.Lock()
	defer fl.mu.Unlock()
	if len(fl.got) != n {
		t.Errorf("%d tasks fired, want %d", len(fl.got), n)
	}
	for _, tk := range tasks {
		fs := fl.got[tk["id"].(string)]
		dups, early := tally(fs)
		if len(fs) != 1 || dups != 0 || early != 0 {
			t.Errorf("task %s: %d fires (%d repeats, %d early), want 1", tk["id"], len(fs), dups, early)
		}
	}
	t.Logf("whole test: %v", time.Since(start).Round(time.Millisecond))
}

// archiveEntry is one entry of a hand-made archive.
type archiveEntry struct {
	name string
	typ  byte
	body string
	size int64 // header size when not len(body)
	link string
}

// makeArchive builds a tar.gz of entries, ending with a manifest of the
// regular ones unless noManifest.
func makeArchive(t *testing.T, entries []archiveEntry, noManifest bool) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	man := backup.Manifest{Format: 1, Node: "n1", CreatedAt: "2026-01-01T00:00:00Z"}
	for _, e := range entries {
		typ := e.typ
		if typ == 0 {
			typ = tar.TypeReg
		}
		size := int64(len(e.body))
		if e.size != 0 {
			size = e.size
		}
		if err := tw.WriteHeader(&tar.Header{Name: e.name, Typeflag: typ, Size: size, Mode: 0o644, Linkname: e.link}); err != nil {
			t.Fatal(err)
		}
		if typ == tar.TypeReg && e.size == 0 {
			_, _ = tw.Write([]byte(e.body))
			sum := sha256.Sum256([]byte(e.body))
			man.Files = append(man.Files, backup.File{Name: e.name, Size: size, SHA256: hex.EncodeToString(sum[:])})
		}
	}
	if !noManifest {
		b, _ := json.Marshal(man)
		_ = tw.WriteHeader(&tar.Header{Name: backup.BackupManifestName, Typeflag: tar.TypeReg, Size: int64(len(b)), Mode: 0o644})
		_, _ = tw.Write(b)
	}
	_ = tw.Close() // a short entry is reported here; the archive stays as written
	_ = gz.Close()
	return buf.Bytes()
}

// TestRestoreRefusesHostileArchives: restore extracts only plain files with
// flat names, within the size bounds, listed by a manifest that matches;
// anything else is refused and leaves nothing in the data dir.
func TestRestoreRefusesHostileArchives(t *testing.T) {
	good := makeArchive(t, []archiveEntry{{name: "000001.sst", body: "data"}, {name: "MANIFEST-000001", body: "m"}}, false)
	tests := []struct {
		name    string
		archive []byte
		limit   int64
		want    string
	}{
		{"dot dot", makeArchive(t, []archiveEntry{{name: "../evil", body: "x"}}, false), 0, "plain file names"},
		{"nested dot dot", makeArchive(t, []archiveEntry{{name: "a/../../evil", body: "x"}}, false), 0, "plain file names"},
		{"absolute", makeArchive(t, []archiveEntry{{name: "/etc/evil", body: "x"}}, false), 0, "plain file names"},
		{"subdirectory", makeArchive(t, []archiveEntry{{name: "sub/000001.sst", body: "x"}}, false), 0, "plain file names"},
		{"symlink", makeArchive(t, []archiveEntry{{name: "link", typ: tar.TypeSymlink, link: "/etc/passwd"}}, false), 0, "not a regular file"},
		{"hard link", makeArchive(t, []archiveEntry{{name: "link", typ: tar.TypeLink, link: "/etc/passwd"}}, false), 0, "not a regular file"},
		{"directory", makeArchive(t, []archiveEntry{{name: "d", typ: tar.TypeDir}}, false), 0, "not a regular file"},
		{"too big", good, 3, "exceed the limit"},
		{"duplicate", makeArchive(t, []archiveEntry{{name: "a", body: "1"}, {name: "a", body: "2"}}, false), 0, "appears twice"},
		{"no manifest", makeArchive(t, []archiveEntry{{name: "a", body: "1"}}, true), 0, "incomplete"},
		{"cut short", good[:len(good)/2], 0, "EOF"},
		{"not gzip", []byte("hello"), 0, "not a gzip archive"},
		{"short entry", makeArchive(t, []archiveEntry{{name: "a", body: "", size: 1 << 20}}, false), 0, "entry \"a\""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "n1.tar.gz")
			if err := os.WriteFile(file, tc.archive, 0o600); err != nil {
				t.Fatal(err)
			}
			dir := filepath.Join(t.TempDir(), "data")
			args := []string{"--from", file, "--data-dir", dir}
			if tc.limit != 0 {
				args = append(args, "--max-bytes", fmt.Sprint(tc.limit))
			}
			var out, errb bytes.Buffer
			err := runRestore(t.Context(), args, &out, &errb)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("restore: %v, want an error containing %q", err, tc.want)
			}
			if _, serr := os.Stat(dir); serr == nil {
				t.Errorf("the refused restore left %s behind", dir)
			}
		})
	}
	// A manifest.json next to the archive that disagrees is refused too.
	d := t.TempDir()
	file := filepath.Join(d, "n1.tar.gz")
	_ = os.WriteFile(file, good, 0o600)
	_ = os.WriteFile(filepath.Join(d, "manifest.json"), []byte(`{"archives":[{"file":"n1.tar.gz","sha256":"00"}]}`), 0o600)
	var out, errb bytes.Buffer
	if err := runRestore(t.Context(), []string{"--from", file, "--data-dir", filepath.Join(d, "data")}, &out, &errb); err == nil || !strings.Contains(err.Error(), "sha256") {
		t.Errorf("restore against a wrong manifest.json: %v", err)
	}
	_ = os.Remove(filepath.Join(d, "manifest.json"))
	if err := runRestore(t.Context(), []string{"--from", file, "--data-dir", filepath.Join(d, "data")}, &out, &errb); err != nil {
		t.Fatalf("restore of a sound archive: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(d, "data", "000001.sst")); err != nil || string(b) != "data" {
		t.Errorf("restored file: %q %v", b, err)
	}
}
