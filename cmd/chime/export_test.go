package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// runBin runs the chime binary with args (stdin from the file in, when
// set) and returns its stdout, stderr and error.
func runBin(t *testing.T, in string, args ...string) (string, string, error) {
	t.Helper()
	cmd := chimeCmd(t, nil, args...)
	if in != "" {
		f, err := os.Open(in)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		cmd.Stdin = f
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	return out.String(), errb.String(), err
}

// exportTo runs chime export against url into a file and returns its records
// by id, failing on a repeated id.
func exportTo(t *testing.T, url, file string) map[string]exportRecord {
	t.Helper()
	out, stderr, err := runBin(t, "", "export", "--addr", url, "--timeout", "60s")
	if err != nil {
		t.Fatalf("export: %v\n%s", err, stderr)
	}
	if err := os.WriteFile(file, []byte(out), 0o600); err != nil {
		t.Fatal(err)
	}
	recs := map[string]exportRecord{}
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, maxImportLine)
	for sc.Scan() {
		var r exportRecord
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("export line %q: %v", sc.Text(), err)
		}
		if _, dup := recs[r.ID]; dup {
			t.Fatalf("task %s exported twice", r.ID)
		}
		recs[r.ID] = r
	}
	return recs
}

// exportTasks is the workload of TestExportImport: n tasks of every kind,
// none due within a day, a fifth of them paused.
func exportTasks(n int) []map[string]any {
	base := time.Now().Add(48 * time.Hour).UTC()
	tasks := make([]map[string]any, 0, n)
	for i := range n {
		tk := map[string]any{"id": fmt.Sprintf("ex-%05d", i), "callback_url": "http://127.0.0.1:9/cb"}
		switch i % 6 {
		case 0:
			tk["delay_ms"] = 36*3600*1000 + i
		case 1:
			tk["due_at"] = base.Add(time.Duration(i) * time.Millisecond).Format(time.RFC3339Nano)
		case 2:
			tk["every_ms"] = 86400000 + i // anchored at creation
		case 3:
			tk["every_ms"] = 3600000
			tk["start_at"] = base.Add(time.Duration(i) * time.Second).Format(time.RFC3339)
			tk["misfire"] = "skip"
		case 4:
			tk["cron"] = "15 9 * * 1"
			tk["timezone"] = "Europe/Berlin"
			tk["max_fails"] = 7
		case 5:
			tk["cron"] = "@every 25h"
		}
		if i%5 == 0 {
			tk["status"] = "paused"
		}
		if i%7 == 0 {
			tk["payload"] = map[string]any{"n": i, "s": "héllo <&>"}
			tk["headers"] = map[string]string{"X-Tenant": fmt.Sprint(i % 13)}
			tk["labels"] = map[string]string{"team": "t" + fmt.Sprint(i%3)}
			tk["timeout_ms"] = 1234
			tk["max_retries"] = 0
		}
		tasks = append(tasks, tk)
	}
	return tasks
}

// TestExportImport exports a three-node cluster of 10,000 tasks (one-shot
// by delay and by instant, periodic, cron, paused) and a few finished ones,
// imports the file into a fresh single node, and checks that every task is
// there with the same spec, status and next due time; a second import
// skips them all; --replace replaces; bad lines are reported by number.
func TestExportImport(t *testing.T) {
	if testing.Short() {
		t.Skip("starts four processes")
	}
	parallelProcs(t, 4)
	const n = 10000
	start := time.Now()
	chimeBinary(t)
	t.Logf("chime built in %v", time.Since(start).Round(time.Millisecond))
	start = time.Now()
	procs := startCluster(t, 3)
	t.Logf("cluster of 3 up in %v", time.Since(start).Round(time.Millisecond))
	fl := newFireLog(t)
	tasks := exportTasks(n)
	for i := range 10 { // finished: fired and done before the export
		tasks = append(tasks, map[string]any{"id": fmt.Sprintf("done-%d", i), "callback_url": fl.srv.URL, "delay_ms": 0})
	}
	start = time.Now()
	createAll(t, procs[0].url, tasks)
	// Pause a few through the endpoint as well, on other nodes than the one
	// that created them.
	for i := 1; i < 100; i += 10 {
		var got map[string]any
		if code := postJSON(t, procs[i%3].url+"/v1/tasks/"+fmt.Sprintf("ex-%05d", i)+"/pause", nil, &got); code != 200 {
			t.Fatalf("pause: %d %v", code, got)
		}
	}
	waitFor(t, 20*time.Second, "the 10 delay 0 tasks done", func() bool {
		var page struct {
			Tasks []json.RawMessage `json:"tasks"`
		}
		resp, err := http.Get(procs[1].url + "/v1/tasks?status=done")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		return json.NewDecoder(resp.Body).Decode(&page) == nil && len(page.Tasks) == 10
	})
	t.Logf("created %d tasks in %v", len(tasks), time.Since(start).Round(time.Millisecond))

	dir := t.TempDir()
	file := filepath.Join(dir, "tasks.ndjson")
	start = time.Now()
	orig := exportTo(t, procs[2].url, file)
	st, _ := os.Stat(file)
	t.Logf("export of %d tasks: %v, %d bytes", len(orig), time.Since(start).Round(time.Millisecond), st.Size())
	if len(orig) != len(tasks) {
		t.Fatalf("exported %d tasks, want %d", len(orig), len(tasks))
	}

	// chime backup reaches every member of the cluster at its http_addr.
	bdir := filepath.Join(dir, "backup")
	if out, stderr, err := runBin(t, "", "backup", "--addr", procs[1].url, "--out", bdir); err != nil {
		t.Fatalf("backup of the cluster: %v\n%s%s", err, out, stderr)
	}
	var man backupManifest
	if b, err := os.ReadFile(filepath.Join(bdir, "manifest.json")); err != nil || json.Unmarshal(b, &man) != nil || len(man.Archives) != 3 || man.TableChanged {
		t.Fatalf("backup manifest of the cluster: %+v %v", man, err)
	}

	fresh := startChime(t, t.TempDir())
	start = time.Now()
	out, stderr, err := runBin(t, file, "import", "--addr", fresh.url, "--timeout", "60s")
	if err != nil {
		t.Fatalf("import: %v\n%s%s", err, out, stderr)
	}
	t.Logf("import: %v: %s", time.Since(start).Round(time.Millisecond), strings.TrimSpace(out))
	if want := fmt.Sprintf("imported: %d created, 0 replaced, 0 skipped (exist), 10 finished (not imported), 0 failed", n); !strings.Contains(out, want) {
		t.Fatalf("import said %q, want %q", out, want)
	}

	got := exportTo(t, fresh.url, filepath.Join(dir, "again.ndjson"))
	if len(got) != n {
		t.Fatalf("the fresh node holds %d tasks, want %d", len(got), n)
	}
	paused := 0
	for id, o := range orig {
		g, ok := got[id]
		if strings.HasPrefix(id, "done-") {
			if o.Status != "done" || ok {
				t.Errorf("%s: exported %s, imported %v; want done, not imported", id, o.Status, ok)
			}
			continue
		}
		if !ok {
			t.Errorf("task %s missing after import", id)
			continue
		}
		if o.Status == "paused" {
			paused++
		}
		// What import changes on purpose: a one-shot task's due_at is its
		// next due; a fixed-rate task without start_at is anchored at it.
		want := o
		switch {
		case o.DelayMs != 0 || o.DueAt != "":
			want.DelayMs, want.DueAt = 0, o.NextDueAt
		case o.EveryMs != 0 || strings.HasPrefix(o.Cron, "@every"):
			if want.StartAt == "" {
				want.StartAt = o.NextDueAt
			}
		}
		g.CreatedAt, g.UpdatedAt, want.CreatedAt, want.UpdatedAt = "", "", "", ""
		if !reflect.DeepEqual(g, want) {
			t.Errorf("task %s:\n got %+v\nwant %+v", id, g, want)
		}
		if o.NextDueAt == "" || g.NextDueAt != o.NextDueAt || g.Status != o.Status {
			t.Errorf("task %s: %s due %s, want %s due %s", id, g.Status, g.NextDueAt, o.Status, o.NextDueAt)
		}
	}
	if want := n/5 + 10; paused != want { // created paused, and paused by the endpoint
		t.Errorf("%d paused tasks, want %d", paused, want)
	}
	if fl.count() != 10 {
		t.Errorf("%d tasks fired, want only the 10 done ones", fl.count())
	}

	// Again: everything exists and is skipped.
	out, stderr, err = runBin(t, file, "import", "--addr", fresh.url)
	if err != nil || !strings.Contains(out, fmt.Sprintf("0 created, 0 replaced, %d skipped (exist)", n)) {
		t.Fatalf("second import: %v: %s%s", err, out, stderr)
	}

	// Bad lines are reported by number; the good ones still land; --replace
	// replaces an existing task.
	bad := filepath.Join(dir, "bad.ndjson")
	lines := []string{
		`{"id":"new-1","callback_url":"http://127.0.0.1:9/cb","due_at":"2099-01-01T00:00:00Z","status":"scheduled","next_due_at":"` + orig["ex-00001"].NextDueAt + `"}`,
		`not json`,
		`{"id":"ex-00003","callback_url":"http://127.0.0.1:9/other","every_ms":3600000,"start_at":"` + orig["ex-00003"].StartAt + `","status":"scheduled","next_due_at":"` + orig["ex-00003"].NextDueAt + `"}`,
		`{"id":"new-2","callback_url":"ftp://x","due_at":"2030-01-01T00:00:00Z","status":"scheduled"}`,
		`{"id":"new-3","callback_url":"http://127.0.0.1:9/cb","status":"weird"}`,
		strings.Repeat("x", maxImportLine+10),
		``,
		`{"id":"new-4","callback_url":"http://127.0.0.1:9/cb","delay_ms":5,"status":"paused","next_due_at":"` + orig["ex-00001"].NextDueAt + `"}`,
	}
	if err := os.WriteFile(bad, []byte(strings.Join(lines, "\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	out, stderr, err = runBin(t, bad, "import", "--addr", fresh.url, "--replace")
	if err == nil {
		t.Errorf("import of bad lines exited 0: %s%s", out, stderr)
	}
	if !strings.Contains(out, "2 created, 1 replaced, 0 skipped (exist), 0 finished (not imported), 4 failed") {
		t.Errorf("import of bad lines said %q", out)
	}
	for _, l := range []string{"line 2:", "line 4 (task new-2): 400 invalid_argument: callback_url", "line 5 (task new-3): unknown status", "line 6: line is longer"} {
		if !strings.Contains(stderr, l) {
			t.Errorf("stderr lacks %q:\n%s", l, stderr)
		}
	}
	var g exportRecord
	resp, err := http.Get(fresh.url + "/v1/tasks/ex-00003")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&g); err != nil || g.CallbackURL != "http://127.0.0.1:9/other" {
		t.Errorf("ex-00003 after --replace: %+v %v", g, err)
	}
	resp2, err := http.Get(fresh.url + "/v1/tasks/new-4")
	if err != nil {
		t.Fatal(err)
	}
	defer resp2.Body.Close()
	g = exportRecord{}
	if err := json.NewDecoder(resp2.Body).Decode(&g); err != nil || g.Status != "paused" || g.DueAt != orig["ex-00001"].NextDueAt {
		t.Errorf("new-4: %+v %v, want paused, due at %s", g, err, orig["ex-00001"].NextDueAt)
	}
}

// waitFor polls cond every 50 ms until it holds, failing after d.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
