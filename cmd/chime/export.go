package main

// chime export and chime import: every task of a cluster as NDJSON, and
// back. See README.md "Backups and export".

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/chime-scheduler/chime/client"
)

// exportRecord is one line of `chime export`: a task's spec as the API
// echoes it (httpapi.TaskResponse) and its schedule state.
type exportRecord struct {
	ID          string            `json:"id"`
	CallbackURL string            `json:"callback_url"`
	DelayMs     int64             `json:"delay_ms,omitempty"`
	DueAt       string            `json:"due_at,omitempty"`
	EveryMs     int64             `json:"every_ms,omitempty"`
	Cron        string            `json:"cron,omitempty"`
	Timezone    string            `json:"timezone,omitempty"`
	StartAt     string            `json:"start_at,omitempty"`
	Payload     json.RawMessage   `json:"payload,omitempty"`
	Headers     map[string]string `json:"headers,omitempty"`
	TimeoutMs   *int64            `json:"timeout_ms,omitempty"`
	MaxRetries  *int              `json:"max_retries,omitempty"`
	Misfire     string            `json:"misfire,omitempty"`
	MaxFails    *int              `json:"max_fails,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	DST         json.RawMessage   `json:"dst,omitempty"`
	EndAt       string            `json:"end_at,omitempty"`
	MaxRuns     int64             `json:"max_runs,omitempty"`
	RetentionMs *int64            `json:"retention_ms,omitempty"`
	OnSuccess   []json.RawMessage `json:"on_success,omitempty"`
	OnFailure   []json.RawMessage `json:"on_failure,omitempty"`
	SuccessURL  string            `json:"success_url,omitempty"`
	FailureURL  string            `json:"failure_url,omitempty"`
	AckURL      string            `json:"ack_url,omitempty"`
	AckDelayMs  *int64            `json:"ack_delay_ms,omitempty"`
	AckRetries  *int              `json:"ack_retries,omitempty"`
	FlowKey     string            `json:"flow_key,omitempty"`

	Status    string `json:"status"`
	NextDueAt string `json:"next_due_at,omitempty"`
	FireCount uint64 `json:"fire_count"`
	FailCount uint64 `json:"fail_count"`
	Runs      uint64 `json:"runs,omitempty"`
	CreatedAt string `json:"created_at,omitempty"`
	UpdatedAt string `json:"updated_at,omitempty"`
}

// exportPage is one page of GET /v1/tasks as export reads it.
type exportPage struct {
	Tasks []struct {
		exportRecord
		Slot uint16 `json:"slot"`
	} `json:"tasks"`
	NextCursor string `json:"next_cursor"`
}

const exportUsage = `usage: chime export [--status S] [--page N] [flags] > tasks.ndjson

Writes every task of the cluster to stdout, one JSON object per line: its spec
and its schedule state (status, next_due_at, fire_count, fail_count,
created_at). Tasks stream page by page; memory stays bounded.

A task that exists for the whole export appears exactly once, provided the
slot table does not change meanwhile: export compares the table version
before and after and fails if it moved (run it again).

flags:
`

// runExport runs `chime export`.
func runExport(ctx context.Context, args []string, stdout, stderr io.Writer, env func(string) string) error {
	tc := &taskCmd{stdin: os.Stdin, stdout: stdout, stderr: stderr, env: env}
	var cf commonFlags
	fs := tc.commandFlags("export", exportUsage, &cf)
	status := fs.String("status", "", "only tasks with this `status` (scheduled, paused, awaiting_ack, done, failed, inactive, completed)")
	page := fs.Int("page", 1000, "tasks per listing request (`N`, 1..1000); lower it if pages of large tasks exceed the client's answer limit")
	pos, help, err := parseArgs(fs, args)
	if help || err != nil {
		return err
	}
	if len(pos) > 0 {
		return fmt.Errorf("export: unexpected argument %q", pos[0])
	}
	if *page < 1 || *page > 1000 {
		return fmt.Errorf("export: --page must be 1..1000, got %d", *page)
	}
	c, err := tc.client(&cf)
	if err != nil {
		return err
	}
	before, err := tableVersion(ctx, c)
	if err != nil {
		return err
	}
	out := bufio.NewWriterSize(stdout, 256<<10)
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	var (
		n        int
		cursor   string
		lastSlot = -1
		lastID   string
	)
	for {
		q := url.Values{"limit": {strconv.Itoa(*page)}}
		if *status != "" {
			q.Set("status", *status)
		}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		// The pages raw: export writes the node's fields as it has them.
		_, body, err := c.Do(ctx, "GET", "/v1/tasks", q, nil)
		if err != nil {
			return fmt.Errorf("export: after %d tasks: %w", n, c.fail(err))
		}
		var p exportPage
		if err := decodeAnswer(body, &p); err != nil {
			return fmt.Errorf("export: after %d tasks: %w", n, err)
		}
		for i := range p.Tasks {
			t := &p.Tasks[i]
			// The listing is in (slot, id) order; anything else would be
			// a repeat, which export never writes.
			if int(t.Slot) < lastSlot || int(t.Slot) == lastSlot && t.ID <= lastID {
				continue
			}
			lastSlot, lastID = int(t.Slot), t.ID
			if err := enc.Encode(&t.exportRecord); err != nil {
				return fmt.Errorf("export: writing: %w", err)
			}
			n++
		}
		if p.NextCursor == "" {
			break
		}
		if p.NextCursor == cursor {
			return fmt.Errorf("export: the listing did not advance past cursor %q", cursor)
		}
		cursor = p.NextCursor
	}
	if err := out.Flush(); err != nil {
		return fmt.Errorf("export: writing: %w", err)
	}
	after, err := tableVersion(ctx, c)
	if err != nil {
		return err
	}
	if !before.Settled || before.TableVersion != after.TableVersion {
		return fmt.Errorf("export: the slot table changed during the export (version %d, settled %v, then %d): "+
			"tasks of moved slots may be missing; run it again", before.TableVersion, before.Settled, after.TableVersion)
	}
	fmt.Fprintf(stderr, "exported %d tasks\n", n)
	return nil
}

// clusterVersion is the part of GET /v1/cluster that export, import and
// backup read.
type clusterVersion struct {
	Self         string `json:"self"`
	TableVersion uint64 `json:"table_version"`
	ViewChecksum string `json:"view_checksum"`
	Settled      bool   `json:"settled"`
	Members      []struct {
		Name       string `json:"name"`
		HTTPAddr   string `json:"http_addr"`
		Status     string `json:"status"`
		SlotsOwned int    `json:"slots_owned"`
	} `json:"members"`
}

func tableVersion(ctx context.Context, c *remote) (clusterVersion, error) {
	var cv clusterVersion
	body, err := c.Cluster(ctx, false)
	if err != nil {
		return cv, c.fail(err)
	}
	return cv, decodeAnswer(body, &cv)
}

// importRequest is the create body import sends for one exported task.
type importRequest struct {
	ID          string            `json:"id"`
	CallbackURL string            `json:"callback_url"`
	DueAt       string            `json:"due_at,omitempty"`
	EveryMs     int64             `json:"every_ms,omitempty"`
	Cron        string            `json:"cron,omitempty"`
	Timezone    string            `json:"timezone,omitempty"`
	StartAt     string            `json:"start_at,omitempty"`
	Payload     json.RawMessage   `json:"payload,omitempty"`
	Headers     map[string]string `json:"headers,omitempty"`
	TimeoutMs   *int64            `json:"timeout_ms,omitempty"`
	MaxRetries  *int              `json:"max_retries,omitempty"`
	Misfire     string            `json:"misfire,omitempty"`
	MaxFails    *int              `json:"max_fails,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	DST         json.RawMessage   `json:"dst,omitempty"`
	EndAt       string            `json:"end_at,omitempty"`
	MaxRuns     int64             `json:"max_runs,omitempty"`
	RetentionMs *int64            `json:"retention_ms,omitempty"`
	OnSuccess   []json.RawMessage `json:"on_success,omitempty"`
	OnFailure   []json.RawMessage `json:"on_failure,omitempty"`
	SuccessURL  string            `json:"success_url,omitempty"`
	FailureURL  string            `json:"failure_url,omitempty"`
	AckURL      string            `json:"ack_url,omitempty"`
	AckDelayMs  *int64            `json:"ack_delay_ms,omitempty"`
	AckRetries  *int              `json:"ack_retries,omitempty"`
	FlowKey     string            `json:"flow_key,omitempty"`
	Status      string            `json:"status,omitempty"`
}

// errFinished marks an exported task that import does not re-create.
var errFinished = errors.New("finished task")

// importRequestOf turns an exported line into the create request that
// restores the task's status and next due time:
//   - a task with max_runs gets the runs it has left (max_runs - runs, at
//     least 1): a re-created task counts its runs from 0;
//   - a one-shot task (delay_ms or due_at) gets due_at = its next_due_at, not
//     a new delay from now (a retrying one-shot task resumes at its retry);
//   - a fixed-rate task (every_ms, cron "@every") without start_at gets
//     start_at = its next_due_at, which anchors its grid where it was;
//   - other cron tasks are deterministic and keep their spec;
//   - a paused task is created paused.
//
// Done, failed, inactive and completed tasks return errFinished: the API cannot create
// a task in those states; nor awaiting_ack (its callback was delivered: a
// re-created task would send it again).
func importRequestOf(r *exportRecord) (*importRequest, error) {
	if r.ID == "" {
		return nil, errors.New("id is missing")
	}
	switch r.Status {
	case "scheduled", "paused":
	case "done", "failed", "inactive", "completed", "awaiting_ack":
		return nil, errFinished
	default:
		return nil, fmt.Errorf("unknown status %q", clipText(r.Status))
	}
	q := &importRequest{ID: r.ID, CallbackURL: r.CallbackURL, Timezone: r.Timezone, StartAt: r.StartAt,
		Payload: r.Payload, Headers: r.Headers, TimeoutMs: r.TimeoutMs, MaxRetries: r.MaxRetries,
		Misfire: r.Misfire, MaxFails: r.MaxFails, Labels: r.Labels, DST: r.DST, EndAt: r.EndAt, RetentionMs: r.RetentionMs,
		OnSuccess: r.OnSuccess, OnFailure: r.OnFailure, SuccessURL: r.SuccessURL, FailureURL: r.FailureURL,
		AckURL: r.AckURL, AckDelayMs: r.AckDelayMs, AckRetries: r.AckRetries, FlowKey: r.FlowKey}
	if r.MaxRuns > 0 {
		// A re-created task counts its runs from 0: it gets the runs left.
		q.MaxRuns = max(r.MaxRuns-int64(min(r.Runs, uint64(r.MaxRuns))), 1)
	}
	if r.Status == "paused" {
		q.Status = "paused"
	}
	switch {
	case r.EveryMs != 0:
		q.EveryMs = r.EveryMs
		if q.StartAt == "" {
			q.StartAt = r.NextDueAt
		}
	case r.Cron != "":
		q.Cron = r.Cron
		if q.StartAt == "" && strings.HasPrefix(strings.TrimSpace(r.Cron), "@every") {
			q.StartAt = r.NextDueAt
		}
	case r.DueAt != "" || r.DelayMs != 0:
		q.DueAt = r.NextDueAt
		if q.DueAt == "" {
			q.DueAt = r.DueAt
		}
		if q.DueAt == "" {
			return nil, errors.New("a delay_ms task without next_due_at: its due time is unknown")
		}
	default:
		return nil, errors.New("no schedule (delay_ms, due_at, every_ms or cron)")
	}
	return q, nil
}

// clipText shortens hostile input echoed in a message.
func clipText(s string) string {
	if len(s) > 64 {
		return strings.ToValidUTF8(s[:64], "") + "…"
	}
	return s
}

// Import limits: a line longer than maxImportLine is rejected (a task is at
// most a few hundred KiB: 64 KiB payload, 64 headers of 8 KiB); a batch
// carries at most importBatchTasks tasks and about importBatchBytes of
// them, well under the server's defaults (10000 tasks, 8 MiB).
const (
	maxImportLine    = 4 << 20
	importBatchTasks = 1000
	importBatchBytes = 4 << 20
	importAttempts   = 20
)

const importUsage = `usage: chime import [--replace] [--file F] [flags] < tasks.ndjson

Re-creates the tasks of a chime export, by id, with the same status and next
due time. A task that exists is left alone and counted as skipped, unless
--replace (then it is replaced). Done, failed, inactive, completed and awaiting_ack tasks are not
re-created (counted as finished). A bad line is reported with its number; the
others are imported and import exits non-zero at the end.

flags:
`

// importer holds the state of one `chime import`.
type importer struct {
	c       *remote
	replace bool
	stderr  io.Writer

	created, replaced, skipped, finished, failed int

	batch     []importItem
	batchSize int
}

// importItem is one task waiting in the batch.
type importItem struct {
	line int
	id   string
	body []byte
}

// runImport runs `chime import`.
func runImport(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, env func(string) string) error {
	tc := &taskCmd{stdin: stdin, stdout: stdout, stderr: stderr, env: env}
	var cf commonFlags
	fs := tc.commandFlags("import", importUsage, &cf)
	replace := fs.Bool("replace", false, "replace tasks that exist (PUT) instead of skipping them")
	file := fs.String("file", "-", "NDJSON `file` to read (- for stdin)")
	pos, help, err := parseArgs(fs, args)
	if help || err != nil {
		return err
	}
	if len(pos) > 0 {
		return fmt.Errorf("import: unexpected argument %q", pos[0])
	}
	in := stdin
	if *file != "-" {
		f, err := os.Open(*file)
		if err != nil {
			return fmt.Errorf("import: %w", err)
		}
		defer f.Close()
		in = f
	}
	c, err := tc.client(&cf)
	if err != nil {
		return err
	}
	im := &importer{c: c, replace: *replace, stderr: stderr}
	if err := im.run(ctx, in); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "imported: %d created, %d replaced, %d skipped (exist), %d finished (not imported), %d failed\n",
		im.created, im.replaced, im.skipped, im.finished, im.failed)
	if im.failed > 0 {
		return fmt.Errorf("import: %d tasks failed (see above)", im.failed)
	}
	return nil
}

// run reads every line of in and imports it.
func (im *importer) run(ctx context.Context, in io.Reader) error {
	rd := bufio.NewReaderSize(in, 64<<10)
	for line := 1; ; line++ {
		b, tooLong, err := readLine(rd, maxImportLine)
		if err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("import: reading line %d: %w", line, err)
		}
		if tooLong {
			im.lineError(line, "", fmt.Errorf("line is longer than %d bytes", maxImportLine))
		} else if len(bytes.TrimSpace(b)) > 0 {
			if e := im.add(ctx, line, b); e != nil {
				return e
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
	}
	return im.flush(ctx)
}

// readLine reads one line (without its newline) of at most limit bytes.
// A longer line is consumed to its end and reported as tooLong. err is
// io.EOF after the last line.
func readLine(rd *bufio.Reader, limit int) (line []byte, tooLong bool, err error) {
	for {
		frag, err := rd.ReadSlice('\n')
		if !tooLong {
			if len(line)+len(frag) > limit+1 { // +1: the newline
				tooLong, line = true, nil
			} else {
				line = append(line, frag...)
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if tooLong {
			return nil, true, err
		}
		if err == nil {
			line = line[:len(line)-1]
		}
		return line, false, err
	}
}

// lineError reports one task that was not imported.
func (im *importer) lineError(line int, id string, err error) {
	im.failed++
	if id != "" {
		fmt.Fprintf(im.stderr, "line %d (task %s): %v\n", line, id, err)
		return
	}
	fmt.Fprintf(im.stderr, "line %d: %v\n", line, err)
}

// add decodes one line and queues its task.
func (im *importer) add(ctx context.Context, line int, b []byte) error {
	var r exportRecord
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&r); err != nil {
		im.lineError(line, "", fmt.Errorf("not an exported task: %v", err))
		return nil
	}
	if dec.More() {
		im.lineError(line, r.ID, errors.New("more than one JSON value on the line"))
		return nil
	}
	q, err := importRequestOf(&r)
	if errors.Is(err, errFinished) {
		im.finished++
		return nil
	}
	if err != nil {
		im.lineError(line, r.ID, err)
		return nil
	}
	var bb bytes.Buffer
	enc := json.NewEncoder(&bb)
	enc.SetEscapeHTML(false) // the payload's bytes as exported
	if err := enc.Encode(q); err != nil {
		im.lineError(line, r.ID, err)
		return nil
	}
	body := bytes.TrimRight(bb.Bytes(), "\n")
	if len(im.batch) > 0 && (len(im.batch) == importBatchTasks || im.batchSize+len(body) > importBatchBytes) {
		if err := im.flush(ctx); err != nil {
			return err
		}
	}
	im.batch = append(im.batch, importItem{line: line, id: r.ID, body: body})
	im.batchSize += len(body) + 1
	return nil
}

// flush sends the queued tasks as one batch, retrying those the cluster
// could not take yet (429, 503), and PUTs the ones that exist if replacing.
func (im *importer) flush(ctx context.Context) error {
	items := im.batch
	im.batch, im.batchSize = nil, 0
	var exists []importItem
	for attempt := 1; len(items) > 0; attempt++ {
		var buf bytes.Buffer
		buf.WriteString(`{"tasks":[`)
		for i, it := range items {
			if i > 0 {
				buf.WriteByte(',')
			}
			buf.Write(it.body)
		}
		buf.WriteString(`]}`)
		// Sent raw: the tasks go as export wrote them, payload bytes
		// included, and the per-task answers decide skip or replace.
		_, body, err := im.c.Do(ctx, "POST", "/v1/tasks:batch", nil, buf.Bytes())
		if err != nil {
			err = im.c.fail(err)
			var ae *apiError
			if errors.As(err, &ae) && retryable(ae.Status) && attempt < importAttempts {
				if err := pause(ctx, attempt); err != nil {
					return err
				}
				continue
			}
			return fmt.Errorf("import: batch of lines %d-%d: %w", items[0].line, items[len(items)-1].line, err)
		}
		var br struct {
			Results []struct {
				Index  int           `json:"index"`
				Status int           `json:"status"`
				Error  *client.Error `json:"error"` // code, message, field
			} `json:"results"`
		}
		if err := decodeAnswer(body, &br); err != nil {
			return fmt.Errorf("import: batch of lines %d-%d: %w", items[0].line, items[len(items)-1].line, err)
		}
		if len(br.Results) != len(items) {
			return fmt.Errorf("import: batch of %d tasks answered %d results", len(items), len(br.Results))
		}
		var again []importItem
		for i, res := range br.Results {
			it := items[i]
			switch {
			case res.Status == http.StatusCreated:
				im.created++
			case res.Status == http.StatusConflict:
				// On a retry, a 409 may be this import's own earlier write.
				exists = append(exists, it)
			case retryable(res.Status) && attempt < importAttempts:
				again = append(again, it)
			default:
				im.lineError(it.line, it.id, itemError(res.Status, res.Error))
			}
		}
		items = again
		if len(items) > 0 {
			if err := pause(ctx, attempt); err != nil {
				return err
			}
		}
	}
	if !im.replace {
		im.skipped += len(exists)
		return nil
	}
	for _, it := range exists {
		if err := im.put(ctx, it); err != nil {
			return err
		}
	}
	return nil
}

// put replaces one existing task.
func (im *importer) put(ctx context.Context, it importItem) error {
	for attempt := 1; ; attempt++ {
		status, _, err := im.c.Do(ctx, "PUT", "/v1/tasks/"+url.PathEscape(it.id), nil, it.body)
		err = im.c.fail(err)
		var ae *apiError
		switch {
		case err == nil && status == http.StatusCreated:
			im.created++ // deleted since the batch saw it
			return nil
		case err == nil:
			im.replaced++
			return nil
		case errors.As(err, &ae) && retryable(ae.Status) && attempt < importAttempts:
			if err := pause(ctx, attempt); err != nil {
				return err
			}
		case errors.As(err, &ae):
			im.lineError(it.line, it.id, err)
			return nil
		default:
			return fmt.Errorf("import: line %d: %w", it.line, err)
		}
	}
}

// itemError renders one failed batch item.
func itemError(status int, e *client.Error) error {
	if e == nil {
		return fmt.Errorf("status %d", status)
	}
	e.Status = status
	return &apiError{e}
}

// retryable reports whether a status means "not now": overloaded or
// unavailable (a slot moving, a node starting).
func retryable(status int) bool {
	return status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable
}

// pause waits before retry attempt+1: 100 ms doubling to 2 s.
func pause(ctx context.Context, attempt int) error {
	d := min(100*time.Millisecond<<min(attempt-1, 5), 2*time.Second)
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}
