package main

// chime backup and chime restore: every member's store as a tar.gz of a
// Pebble checkpoint (GET /v1/admin/backup), and a data dir made from one.
// See README.md "Backups and export".

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/chime-scheduler/chime/node/backup"
)

// backupManifest is manifest.json in a backup directory.
type backupManifest struct {
	CreatedAt    string            `json:"created_at"`
	Addr         string            `json:"addr"`
	TableVersion uint64            `json:"table_version"`
	ViewChecksum string            `json:"view_checksum"`
	Settled      bool              `json:"settled"`
	TableChanged bool              `json:"table_changed"` // the table moved while the archives were taken
	Members      []backupMember    `json:"members"`
	Archives     []backupArchive   `json:"archives"`
	Skipped      []string          `json:"skipped,omitempty"` // members not alive: no archive
	Errors       map[string]string `json:"errors,omitempty"`
}

type backupMember struct {
	Name       string `json:"name"`
	HTTPAddr   string `json:"http_addr"`
	Status     string `json:"status"`
	SlotsOwned int    `json:"slots_owned"`
}

type backupArchive struct {
	Node         string `json:"node"`
	File         string `json:"file"`
	Bytes        int64  `json:"bytes"`
	SHA256       string `json:"sha256"`
	Files        int    `json:"files"`
	CheckpointAt string `json:"checkpoint_at"`
}

const backupUsage = `usage: chime backup --out DIR [flags]

Asks every alive member of the cluster (GET /v1/cluster) for an online,
consistent copy of its store (GET /v1/admin/backup: a Pebble checkpoint as a
tar.gz) and writes DIR/<member>.tar.gz for each, verified, plus
DIR/manifest.json (time, members, slot table version, each archive's sha256).
Members are reached at their http_addr with --addr's scheme.

flags:
`

// runBackup runs `chime backup`.
func runBackup(ctx context.Context, args []string, stdout, stderr io.Writer, env func(string) string) error {
	tc := &taskCmd{stdin: os.Stdin, stdout: stdout, stderr: stderr, env: env}
	var cf commonFlags
	fs := tc.commandFlags("backup", backupUsage, &cf)
	out := fs.String("out", "", "`directory` for the archives and manifest.json (created; must not hold a manifest.json)")
	pos, help, err := parseArgs(fs, args)
	if help || err != nil {
		return err
	}
	if len(pos) > 0 {
		return fmt.Errorf("backup: unexpected argument %q", pos[0])
	}
	if *out == "" {
		return errors.New("backup: --out DIR is required")
	}
	if _, err := os.Stat(filepath.Join(*out, "manifest.json")); err == nil {
		return fmt.Errorf("backup: %s already holds a backup (manifest.json); choose another --out", *out)
	}
	if err := os.MkdirAll(*out, 0o700); err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	c, err := tc.client(&cf)
	if err != nil {
		return err
	}
	before, err := tableVersion(ctx, c)
	if err != nil {
		return err
	}
	man := backupManifest{CreatedAt: time.Now().UTC().Format(time.RFC3339), Addr: c.seeds[0],
		TableVersion: before.TableVersion, ViewChecksum: before.ViewChecksum, Settled: before.Settled}
	scheme, _, _ := strings.Cut(c.seeds[0], "://")
	for _, m := range before.Members {
		man.Members = append(man.Members, backupMember{m.Name, m.HTTPAddr, m.Status, m.SlotsOwned})
		if m.Status != "alive" {
			man.Skipped = append(man.Skipped, m.Name)
			continue
		}
		base := c.seeds[0] // the member that answered, when it is self (one seed)
		if m.Name != before.Self && m.HTTPAddr != "" {
			base = scheme + "://" + m.HTTPAddr
		}
		a, err := fetchBackup(ctx, c, base, m.Name, *out)
		if err != nil {
			if man.Errors == nil {
				man.Errors = map[string]string{}
			}
			man.Errors[m.Name] = err.Error()
			fmt.Fprintf(stderr, "backup of %s failed: %v\n", m.Name, err)
			continue
		}
		man.Archives = append(man.Archives, a)
		fmt.Fprintf(stdout, "%s: %s, %d bytes, sha256 %s\n", m.Name, a.File, a.Bytes, a.SHA256)
	}
	if after, err := tableVersion(ctx, c); err != nil || after.TableVersion != before.TableVersion {
		man.TableChanged = true
	}
	b, err := json.MarshalIndent(man, "", "  ")
	if err != nil {
		return err
	}
	if err := writeFileSync(filepath.Join(*out, "manifest.json"), append(b, '\n')); err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	switch {
	case len(man.Errors) > 0:
		return fmt.Errorf("backup: %d of %d members failed (see %s)", len(man.Errors), len(man.Errors)+len(man.Archives), filepath.Join(*out, "manifest.json"))
	case !man.Settled || man.TableChanged:
		return errors.New("backup: the slot table was not settled or changed while the archives were taken; they are each consistent, but may not cover every slot: run it again")
	}
	return nil
}

// fetchBackup downloads one member's archive into dir as <name>.tar.gz,
// verifying it on the way (restoreArchive into nowhere).
func fetchBackup(ctx context.Context, c *remote, base, name, dir string) (backupArchive, error) {
	if !archiveNameRe.MatchString(name) {
		return backupArchive{}, fmt.Errorf("member name %q is not usable as a file name", clipText(name))
	}
	archive, err := c.Backup(ctx, base)
	if err != nil {
		return backupArchive{}, c.fail(err)
	}
	defer archive.Close()
	file := name + ".tar.gz"
	part := filepath.Join(dir, file+".part")
	f, err := os.OpenFile(part, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return backupArchive{}, err
	}
	defer os.Remove(part) // after a failure; renamed away on success
	h := sha256.New()
	cw := &countWriter{}
	// Verify while downloading: the archive must be complete and sound.
	bm, err := readArchive(io.TeeReader(archive, io.MultiWriter(f, h, cw)), "", defaultRestoreLimit)
	if err == nil {
		_, err = io.Copy(io.MultiWriter(f, h, cw), io.LimitReader(archive, 1<<20)) // what the gzip reader left
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(part, filepath.Join(dir, file))
	}
	if err != nil {
		return backupArchive{}, err
	}
	return backupArchive{Node: name, File: file, Bytes: cw.n, SHA256: hex.EncodeToString(h.Sum(nil)),
		Files: len(bm.Files), CheckpointAt: bm.CreatedAt}, nil
}

type countWriter struct{ n int64 }

func (c *countWriter) Write(p []byte) (int, error) { c.n += int64(len(p)); return len(p), nil }

// writeFileSync writes a file and syncs it.
func writeFileSync(name string, b []byte) error {
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Archive bounds. Entries are flat file names as Pebble writes them
// (000123.sst, MANIFEST-000001, OPTIONS-000003, marker.*); a store is at
// most maxFiles files and maxBytes bytes in all (--max-bytes), and the
// manifest entry is small.
var archiveNameRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

type restoreLimit struct {
	maxFiles int
	maxBytes int64
}

var defaultRestoreLimit = restoreLimit{maxFiles: 100000, maxBytes: 1 << 40}

const maxManifestBytes = 16 << 20

// readArchive reads a backup archive from r. With dir "" it only verifies;
// otherwise it writes the files into dir (which must exist and be empty).
// It checks every entry (a plain file with a flat, safe name, no
// duplicates, sizes within lim) and that the archive ends with a manifest
// that lists exactly the files read, with their sizes and SHA-256.
func readArchive(r io.Reader, dir string, lim restoreLimit) (*backup.Manifest, error) {
	gz, err := gzip.NewReader(r)
	if err != nil {
		return nil, fmt.Errorf("not a gzip archive: %w", err)
	}
	gz.Multistream(false)
	tr := tar.NewReader(gz)
	type got struct {
		size int64
		sum  string
	}
	files := map[string]got{}
	var total int64
	var man *backup.Manifest
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("reading the archive: %w", err)
		}
		if man != nil {
			return nil, fmt.Errorf("entry %q after the manifest", clipText(h.Name))
		}
		switch {
		case h.Typeflag != tar.TypeReg:
			return nil, fmt.Errorf("entry %q is not a regular file (type %q)", clipText(h.Name), h.Typeflag)
		case !archiveNameRe.MatchString(h.Name):
			return nil, fmt.Errorf("entry %q: only plain file names are allowed (no directories, no ..)", clipText(h.Name))
		case h.Size < 0 || h.Size > lim.maxBytes-total:
			return nil, fmt.Errorf("entry %q: %d bytes exceed the limit of %d bytes in all", h.Name, h.Size, lim.maxBytes)
		}
		if _, dup := files[h.Name]; dup {
			return nil, fmt.Errorf("entry %q appears twice", h.Name)
		}
		if h.Name == backup.BackupManifestName {
			if h.Size > maxManifestBytes {
				return nil, fmt.Errorf("manifest of %d bytes is over %d", h.Size, maxManifestBytes)
			}
			b, err := io.ReadAll(io.LimitReader(tr, h.Size))
			if err != nil {
				return nil, fmt.Errorf("reading the manifest: %w", err)
			}
			man = &backup.Manifest{}
			if err := json.Unmarshal(b, man); err != nil {
				return nil, fmt.Errorf("malformed manifest: %w", err)
			}
			continue
		}
		if len(files) == lim.maxFiles {
			return nil, fmt.Errorf("more than %d files", lim.maxFiles)
		}
		total += h.Size
		sum := sha256.New()
		var w io.Writer = sum
		var f *os.File
		if dir != "" {
			f, err = os.OpenFile(filepath.Join(dir, h.Name), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
			if err != nil {
				return nil, err
			}
			w = io.MultiWriter(f, sum)
		}
		n, err := io.Copy(w, io.LimitReader(tr, h.Size))
		if err == nil && n != h.Size {
			err = io.ErrUnexpectedEOF
		}
		if f != nil {
			if err == nil {
				err = f.Sync()
			}
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil {
			return nil, fmt.Errorf("entry %q: %w", h.Name, err)
		}
		files[h.Name] = got{h.Size, hex.EncodeToString(sum.Sum(nil))}
	}
	// The gzip trailer: its CRC and length check everything above.
	if _, err := io.Copy(io.Discard, io.LimitReader(gz, 1<<20)); err != nil {
		return nil, fmt.Errorf("reading the archive: %w", err)
	}
	if man == nil {
		return nil, errors.New("the archive has no manifest (" + backup.BackupManifestName + "): it is incomplete")
	}
	if man.Format != 1 {
		return nil, fmt.Errorf("unknown archive format %d", man.Format)
	}
	if len(man.Files) != len(files) {
		return nil, fmt.Errorf("the manifest lists %d files, the archive holds %d", len(man.Files), len(files))
	}
	for _, mf := range man.Files {
		g, ok := files[mf.Name]
		if !ok || g.size != mf.Size || g.sum != mf.SHA256 {
			return nil, fmt.Errorf("file %q does not match the manifest", clipText(mf.Name))
		}
	}
	return man, nil
}

const restoreUsage = `usage: chime restore --from ARCHIVE --data-dir DIR

Makes DIR (which must not exist or be empty) a data dir a node can start
from: verifies ARCHIVE (a <member>.tar.gz of chime backup; against the
manifest.json next to it, when there is one) and extracts it.

flags:
`

// runRestore runs `chime restore`.
func runRestore(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("restore", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, restoreUsage); fs.PrintDefaults() }
	from := fs.String("from", "", "backup `archive` (<member>.tar.gz)")
	dataDir := fs.String("data-dir", "", "`directory` to restore into (must not exist or be empty)")
	maxBytes := fs.Int64("max-bytes", defaultRestoreLimit.maxBytes, "refuse an archive whose files add up to more than `N` bytes")
	pos, help, err := parseArgs(fs, args)
	if help || err != nil {
		return err
	}
	if len(pos) > 0 {
		return fmt.Errorf("restore: unexpected argument %q", pos[0])
	}
	if *from == "" || *dataDir == "" {
		return errors.New("restore: --from ARCHIVE and --data-dir DIR are required")
	}
	lim := defaultRestoreLimit
	lim.maxBytes = *maxBytes
	// The archive's sha256 in manifest.json, when the archive sits in a
	// backup directory.
	var want string
	if b, err := os.ReadFile(filepath.Join(filepath.Dir(*from), "manifest.json")); err == nil {
		var bm backupManifest
		if err := json.Unmarshal(b, &bm); err != nil {
			return fmt.Errorf("restore: %s: %w", filepath.Join(filepath.Dir(*from), "manifest.json"), err)
		}
		for _, a := range bm.Archives {
			if a.File == filepath.Base(*from) {
				want = a.SHA256
			}
		}
	}
	created, err := prepareDataDir(*dataDir)
	if err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	f, err := os.Open(*from)
	if err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	man, err := readArchive(io.TeeReader(f, h), *dataDir, lim)
	if err == nil {
		_, err = io.Copy(h, f) // the rest, for the archive's sha256
	}
	if err == nil && want != "" && hex.EncodeToString(h.Sum(nil)) != want {
		err = fmt.Errorf("%s does not match its sha256 in manifest.json", *from)
	}
	if err == nil {
		err = syncDir(*dataDir)
	}
	if err != nil {
		cleanDataDir(*dataDir, created)
		return fmt.Errorf("restore: %w", err)
	}
	verified := "its own manifest"
	if want != "" {
		verified += " and manifest.json"
	}
	fmt.Fprintf(stdout, "restored %d files of %s (checkpoint of %s) into %s, verified against %s\n",
		len(man.Files), man.Node, man.CreatedAt, *dataDir, verified)
	return nil
}

// prepareDataDir makes sure dir exists and is empty; created reports that
// restore made it.
func prepareDataDir(dir string) (created bool, err error) {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return true, os.MkdirAll(dir, 0o700)
	case err != nil:
		return false, err
	case len(entries) > 0:
		return false, fmt.Errorf("%s is not empty; restore only into a new or empty directory", dir)
	}
	return false, nil
}

// cleanDataDir undoes a failed restore: removes what it wrote.
func cleanDataDir(dir string, created bool) {
	if created {
		_ = os.RemoveAll(dir)
		return
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		_ = os.RemoveAll(filepath.Join(dir, e.Name()))
	}
}

// syncDir fsyncs a directory, so the files created in it survive a crash.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
