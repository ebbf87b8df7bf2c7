package node

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/chime-scheduler/chime/node/dispatch"
	"github.com/chime-scheduler/chime/slots"
	"github.com/chime-scheduler/chime/storage"
)

// routes builds the HTTP API of API.md.
func (n *Node) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/tasks", n.handleCreate)
	mux.HandleFunc("GET /v1/tasks", n.handleList)
	mux.HandleFunc("POST /v1/tasks:batch", n.handleBatch)
	mux.HandleFunc("PUT /v1/tasks/{id}", n.handlePut)
	mux.HandleFunc("GET /v1/tasks/{id}", n.handleGet)
	mux.HandleFunc("DELETE /v1/tasks/{id}", n.handleDelete)
	mux.HandleFunc("POST /v1/tasks/{id}/pause", n.handleOne(opPause, http.StatusOK))
	mux.HandleFunc("POST /v1/tasks/{id}/resume", n.handleOne(opResume, http.StatusOK))
	mux.HandleFunc("POST /v1/tasks/{id}/trigger", n.handleOne(opTrigger, http.StatusAccepted))
	mux.HandleFunc("GET /v1/tasks/{id}/executions", n.handleExecutions)
	mux.HandleFunc("GET /v1/cluster", n.handleCluster)
	mux.HandleFunc("POST /v1/cluster/members/{name}/forget", n.handleForget)
	mux.HandleFunc("GET /v1/cluster/keys", n.handleKeys)
	mux.HandleFunc("POST /v1/cluster/keys", n.handleKeys)
	mux.HandleFunc("GET /v1/stats", n.handleStats)
	mux.HandleFunc("GET /v1/snapshot", n.handleSnapshot)
	mux.HandleFunc("GET /v1/admin/backup", n.handleBackup)
	mux.HandleFunc("POST /v1/test/callback", n.handleTestCallback)
	mux.HandleFunc("GET /healthz", n.handleHealth)
	mux.HandleFunc("GET /readyz", n.handleReady)
	mux.HandleFunc("GET /metrics", n.handleMetrics)
	mux.HandleFunc("GET /internal/v1/tasks", n.handleInternalList)
	mux.HandleFunc("POST /internal/v1/replicate", n.handleReplicate)
	mux.HandleFunc("POST /internal/v1/ctl", n.handleCtl)
	mux.HandleFunc("POST /internal/v1/antientropy", n.handleAntiEntropy)
	mux.HandleFunc("GET /internal/v1/slots/{slot}", n.handleSlotDebug)
	mux.HandleFunc("GET /internal/v1/member", n.handleInternalMember)
	mux.HandleFunc("POST /internal/v1/keys", n.handleInternalKeys)
	// Anything else under /v1/ (an unknown path, or a known path with the
	// wrong method) gets a JSON error rather than the mux's plain text.
	for _, p := range []string{"/v1/", "/v1/tasks", "/v1/tasks:batch", "/v1/tasks/{id}", "/v1/tasks/{id}/{action}"} {
		mux.HandleFunc(p, handleNoRoute)
	}
	return n.withCommon(mux)
}

// withCommon names the node on every answer and runs the edge checks
// (edge.go): Host, bearer token and role, Content-Type.
func (n *Node) withCommon(next http.Handler) http.Handler {
	n.tokens = newAPITokens(n.cfg.APIToken, n.cfg.ReadToken)
	n.guard = newHostGuard(&n.cfg)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Chime-Node", n.cfg.Name)
		r, e := n.checkEdge(r)
		if e != nil {
			if e.Code == CodeUnauthenticated {
				w.Header().Set("WWW-Authenticate", `Bearer realm="chime"`)
			}
			writeError(w, e)
			return
		}
		if !n.running.Load() && strings.HasPrefix(r.URL.Path, "/v1/") {
			writeError(w, n.stoppedError())
			return
		}
		next.ServeHTTP(w, r)
	})
}

func handleNoRoute(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, "/v1/tasks") && r.URL.Path != "/v1/tasks/" {
		writeError(w, &Error{Code: CodeInvalidArgument, Status: http.StatusMethodNotAllowed,
			Message: "method " + r.Method + " is not allowed on " + r.URL.Path})
		return
	}
	writeError(w, &Error{Code: CodeNotFound, Message: "no such endpoint: " + r.URL.Path})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, e *Error) {
	switch e.Code {
	case CodeOverloaded, CodeUnavailable:
		w.Header().Set("Retry-After", "1")
	}
	writeJSON(w, e.HTTPStatus(), struct {
		Error *Error `json:"error"`
	}{e})
}

// readBody reads a request body of at most MaxBodyBytes.
func (n *Node) readBody(w http.ResponseWriter, r *http.Request) ([]byte, *Error) {
	return n.readBodyLimit(w, r, n.cfg.Limits.MaxBodyBytes)
}

// readBodyLimit reads a request body of at most limit bytes.
func (n *Node) readBodyLimit(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, *Error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, &Error{Code: CodeTooLarge, Message: "request body is over " + strconv.FormatInt(limit, 10) + " bytes"}
		}
		return nil, &Error{Code: CodeInvalidArgument, Message: "reading the body: " + err.Error()}
	}
	return body, nil
}

// overloaded reports whether new work should be refused: the dispatcher's
// backlog is full, so more fires could only wait in memory.
func (n *Node) overloaded() *Error {
	if n.disp.Queued() >= n.cfg.Dispatch.MaxQueued {
		return &Error{Code: CodeOverloaded, Message: "callback backlog is full; retry later"}
	}
	return nil
}

// newTask builds the record of a validated task.
func newTask(id string, spec storage.Spec, now time.Time) (*storage.Task, *Error) {
	due, err := firstDue(&spec, now)
	if err != nil {
		return nil, invalid(scheduleField(&spec), "%v", err)
	}
	if due == 0 {
		return nil, invalid(scheduleField(&spec), "the schedule has no future occurrence")
	}
	ns := now.UnixNano()
	return &storage.Task{
		ID: id, Slot: slots.Of(id), Spec: spec, Status: storage.StatusScheduled,
		NextDue: due, CreatedAt: ns, UpdatedAt: ns,
	}, nil
}

// scheduleField names the request field that carries spec's schedule.
func scheduleField(spec *storage.Spec) string {
	switch spec.Kind {
	case storage.KindEvery:
		return "every_ms"
	case storage.KindCron:
		return "cron"
	}
	if spec.DelayMs != 0 {
		return "delay_ms"
	}
	return "due_at"
}

// parseTask decodes and validates one task body. pathID, when set, is the
// id from the URL, which a body id must match. generated reports that the
// task got a new id because neither the body nor the path had one.
func (n *Node) parseTask(body []byte, pathID string, now time.Time) (t *storage.Task, generated bool, e *Error) {
	req, e := decodeTaskRequest(body)
	if e != nil {
		return nil, false, e
	}
	if pathID != "" {
		if req.ID != "" && req.ID != pathID {
			return nil, false, invalid("id", "the body's id %q differs from the path's %q", req.ID, pathID)
		}
		req.ID = pathID
	}
	generated = req.ID == ""
	id, spec, e := req.validate(now, n.cfg.Limits)
	if e != nil {
		return nil, false, e
	}
	if err := n.policy.CheckURL(spec.CallbackURL); err != nil {
		if n.metrics != nil {
			n.metrics.callbacksDenied.WithLabelValues("create").Inc()
		}
		return nil, false, invalid("callback_url", "%s", err.Error())
	}
	if t, e = newTask(id, spec, now); e != nil {
		return nil, false, e
	}
	t.Status, _ = req.initialStatus() // checked by validate
	return t, generated, nil
}

func (n *Node) handleCreate(w http.ResponseWriter, r *http.Request) {
	n.writeTask(w, r, opCreate, "")
}

func (n *Node) handlePut(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if e := validateID(id); e != nil {
		writeError(w, e)
		return
	}
	n.writeTask(w, r, opPut, id)
}

// moveWait is how long a request for a slot that this node's table gives
// it, but that it does not hold yet (the slot is moving here: the old
// owner seals and hands it over), is held for the handover before it is
// answered 503 with Retry-After.
const moveWait = 2 * time.Second

// awaitHeld waits until this node holds every slot of ss as its owner (at
// most moveWait, or until ctx ends) and reports whether it does. A
// standalone node holds every slot.
func (n *Node) awaitHeld(ctx context.Context, ss ...uint16) bool {
	if n.ctl == nil {
		return true
	}
	ctx, cancel := context.WithTimeout(ctx, moveWait)
	defer cancel()
	return n.ctl.AwaitHeld(ctx, ss...)
}

// routedNoBody forwards a request without a body for id to its owner; it
// reports whether it answered.
func (n *Node) routedNoBody(w http.ResponseWriter, r *http.Request, id string) bool {
	return !n.view.Load().owns(slots.Of(id)) && n.routed(w, r, id, nil)
}

func (n *Node) writeTask(w http.ResponseWriter, r *http.Request, kind opKind, pathID string) {
	body, e := n.readBody(w, r)
	if e != nil {
		writeError(w, e)
		return
	}
	now := n.now()
	t, generated, e := n.parseTask(body, pathID, now)
	if e != nil {
		writeError(w, e)
		return
	}
	if !n.view.Load().owns(t.Slot) {
		if generated {
			body = withID(body, t.ID)
		}
		n.routed(w, r, t.ID, body)
		return
	}
	n.awaitHeld(r.Context(), t.Slot)
	if e := n.overloaded(); e != nil {
		writeError(w, e)
		return
	}
	op := &writeOp{kind: kind, now: now.UnixNano(), tasks: []*storage.Task{t}}
	if err := n.writer.submit(r.Context().Done(), op); err != nil {
		writeError(w, asError(err))
		return
	}
	if op.errs[0] != nil {
		writeError(w, op.errs[0])
		return
	}
	status := http.StatusOK
	if op.created[0] {
		status = http.StatusCreated
	}
	writeJSON(w, status, taskResponse(op.out[0], n.cfg.Name))
}

// batchResult is one entry of the batch answer, in request order.
type batchResult struct {
	Index  int    `json:"index"`
	ID     string `json:"id,omitempty"`
	Status int    `json:"status"`
	Error  *Error `json:"error,omitempty"`
}

// batchEnvelope is the body of POST /v1/tasks:batch.
type batchEnvelope struct {
	Tasks []json.RawMessage `json:"tasks"`
}

// decodeBatchEnvelope decodes a batch body into its tasks' raw JSON: one
// to max of them, no other field.
func decodeBatchEnvelope(body []byte, max int) ([]json.RawMessage, *Error) {
	var req batchEnvelope
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return nil, invalid("tasks", "body must be {\"tasks\":[…]}: %v", err)
	}
	if len(req.Tasks) == 0 {
		return nil, invalid("tasks", "no tasks given")
	}
	if len(req.Tasks) > max {
		return nil, &Error{Code: CodeTooLarge, Status: http.StatusBadRequest, Field: "tasks",
			Message: "at most " + strconv.Itoa(max) + " tasks per batch"}
	}
	return req.Tasks, nil
}

func (n *Node) handleBatch(w http.ResponseWriter, r *http.Request) {
	body, e := n.readBody(w, r)
	if e != nil {
		writeError(w, e)
		return
	}
	var req batchEnvelope
	if req.Tasks, e = decodeBatchEnvelope(body, n.cfg.Limits.MaxBatchTasks); e != nil {
		writeError(w, e)
		return
	}
	if e := n.overloaded(); e != nil {
		writeError(w, e)
		return
	}
	now := n.now()
	results := make([]batchResult, len(req.Tasks))
	tasks := make([]*storage.Task, len(req.Tasks))
	for i, raw := range req.Tasks {
		results[i].Index = i
		t, generated, e := n.parseTask(raw, "", now)
		if e != nil {
			results[i].Status = e.HTTPStatus()
			results[i].Error = e
			continue
		}
		tasks[i] = t
		results[i].ID = t.ID
		if generated {
			req.Tasks[i] = withID(raw, t.ID)
		}
	}
	remote := n.splitBatch(r, body, req.Tasks, tasks, results)
	var local []uint16
	for _, t := range tasks {
		if t != nil {
			local = append(local, t.Slot)
		}
	}
	n.awaitHeld(r.Context(), local...)
	op := &writeOp{kind: opCreate, now: now.UnixNano(), tasks: tasks, errs: make([]*Error, len(tasks))}
	if slices.ContainsFunc(tasks, func(t *storage.Task) bool { return t != nil }) {
		if err := n.writer.submit(r.Context().Done(), op); err != nil {
			if remote.n == 0 {
				writeError(w, asError(err))
				return
			}
			// Sub-batches went to other nodes and may be stored: answer per
			// task, so a retry can tell which ones to send again.
			e := asError(err)
			for i := range op.errs {
				op.errs[i] = e
			}
		}
	}
	remote.wg.Wait()
	for i := range results {
		if results[i].Error != nil || tasks[i] == nil {
			continue
		}
		if e := op.errs[i]; e != nil {
			results[i].Status = e.HTTPStatus()
			results[i].Error = e
			continue
		}
		results[i].Status = http.StatusCreated
	}
	writeJSON(w, http.StatusOK, struct {
		Results []batchResult `json:"results"`
	}{results})
}

func (n *Node) handleGet(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if e := validateID(id); e != nil {
		writeError(w, e)
		return
	}
	if n.routedNoBody(w, r, id) {
		return
	}
	if !n.awaitHeld(r.Context(), slots.Of(id)) {
		// The copy here may lack the task (still catching up) or be one
		// the slot's holder has moved past: say so rather than 404.
		writeError(w, errNotOwner)
		return
	}
	t, err := n.store.Get(slots.Of(id), id)
	if err != nil {
		if errors.Is(err, storage.ErrNotFound) {
			writeError(w, errNotFound)
			return
		}
		writeError(w, asError(err))
		return
	}
	tr := taskResponse(t, n.cfg.Name)
	if readOnly(r) {
		tr.CallbackURL = RedactURL(tr.CallbackURL)
	}
	writeJSON(w, http.StatusOK, tr)
}

func (n *Node) handleDelete(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if e := validateID(id); e != nil {
		writeError(w, e)
		return
	}
	if n.routedNoBody(w, r, id) {
		return
	}
	n.awaitHeld(r.Context(), slots.Of(id))
	op := &writeOp{kind: opDelete, id: id}
	if err := n.writer.submit(r.Context().Done(), op); err != nil {
		writeError(w, asError(err))
		return
	}
	if op.errs != nil && op.errs[0] != nil {
		writeError(w, op.errs[0])
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// handleOne serves pause, resume and trigger.
func (n *Node) handleOne(kind opKind, status int) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		if e := validateID(id); e != nil {
			writeError(w, e)
			return
		}
		if n.routedNoBody(w, r, id) {
			return
		}
		n.awaitHeld(r.Context(), slots.Of(id))
		op := &writeOp{kind: kind, id: id, now: n.now().UnixNano()}
		if err := n.writer.submit(r.Context().Done(), op); err != nil {
			writeError(w, asError(err))
			return
		}
		if op.errs != nil && op.errs[0] != nil {
			writeError(w, op.errs[0])
			return
		}
		writeJSON(w, status, taskResponse(op.out[0], n.cfg.Name))
	}
}

// Listing limits: a page has at most maxListLimit tasks, and one request
// reads at most listScanBudget records, so a selective filter over a large
// store answers a short page with a cursor instead of scanning everything.
const (
	defaultListLimit = 100
	maxListLimit     = 1000
	listScanBudget   = 20000
)

// listQuery is a parsed GET /v1/tasks.
type listQuery struct {
	limit    int
	status   storage.Status
	labelKey string
	labelVal string
	hasLabel bool
	start    storage.Position
}

func parseListQuery(r *http.Request) (listQuery, *Error) {
	q := r.URL.Query()
	lq := listQuery{limit: defaultListLimit}
	if s := q.Get("limit"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 || v > maxListLimit {
			return lq, invalid("limit", "limit must be an integer in 1..%d", maxListLimit)
		}
		lq.limit = v
	}
	if s := q.Get("status"); s != "" {
		st, ok := storage.ParseStatus(s)
		if !ok {
			return lq, invalid("status", "unknown status %q", s)
		}
		lq.status = st
	}
	if s := q.Get("label"); s != "" {
		k, v, ok := strings.Cut(s, ":")
		if !ok || k == "" {
			return lq, invalid("label", "label filter must be key:value")
		}
		lq.labelKey, lq.labelVal, lq.hasLabel = k, v, true
	}
	if c := q.Get("cursor"); c != "" {
		p, ok := decodeCursor(c)
		if !ok {
			return lq, invalid("cursor", "malformed cursor")
		}
		lq.start = p
	}
	return lq, nil
}

// listLocal lists this node's tasks matching q from q.start in key order
// (slot, then id), only in slots owned reports true for (nil: all). It stops
// after q.limit matches or listScanBudget records; stop is then the
// position of the last record read, from which the listing continues.
func (n *Node) listLocal(q listQuery, owned func(uint16) bool) (tasks []TaskResponse, stop *storage.Position, err error) {
	tasks = make([]TaskResponse, 0, min(q.limit, 64))
	var last *storage.Task
	scanned := 0
	more := false
	err = n.store.ScanTasks(q.start, func(t *storage.Task) bool {
		if len(tasks) == q.limit || scanned == listScanBudget {
			more = true
			return false
		}
		scanned++
		last = t
		if owned != nil && !owned(t.Slot) {
			return true
		}
		if q.status != 0 && t.Status != q.status {
			return true
		}
		if q.hasLabel {
			if v, ok := t.Spec.Labels[q.labelKey]; !ok || v != q.labelVal {
				return true
			}
		}
		tasks = append(tasks, taskResponse(t, n.cfg.Name))
		return true
	})
	if err != nil {
		return nil, nil, err
	}
	if more && last != nil {
		stop = &storage.Position{Slot: last.Slot, ID: last.ID, Exclusive: true}
	}
	return tasks, stop, nil
}

// listPage is the answer of GET /v1/tasks, and of its per-node part
// GET /internal/v1/tasks (NextCursor is then the node's stop position).
type listPage struct {
	Tasks      []TaskResponse `json:"tasks"`
	NextCursor string         `json:"next_cursor"`
}

func (n *Node) handleList(w http.ResponseWriter, r *http.Request) {
	q, e := parseListQuery(r)
	if e != nil {
		writeError(w, e)
		return
	}
	if n.cluster != nil {
		n.listCluster(w, r, q)
		return
	}
	tasks, stop, err := n.listLocal(q, nil)
	if err != nil {
		writeError(w, asError(err))
		return
	}
	next := ""
	if stop != nil {
		next = encodeCursor(*stop)
	}
	if readOnly(r) {
		redactTasks(tasks)
	}
	writeJSON(w, http.StatusOK, listPage{tasks, next})
}

// A cursor is the (slot, id) position of the last task a page looked at,
// base64url encoded: two bytes of slot, then the id.
func encodeCursor(p storage.Position) string {
	b := binary.BigEndian.AppendUint16(nil, p.Slot)
	return base64.RawURLEncoding.EncodeToString(append(b, p.ID...))
}

func decodeCursor(s string) (storage.Position, bool) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) < 3 || len(b) > 2+maxIDLen {
		return storage.Position{}, false
	}
	p := storage.Position{Slot: binary.BigEndian.Uint16(b), ID: string(b[2:]), Exclusive: true}
	if p.Slot >= slots.Count || validateID(p.ID) != nil || encodeCursor(p) != s {
		// The last test keeps one spelling per cursor (the decoder skips
		// line breaks and unused bits).
		return storage.Position{}, false
	}
	return p, true
}

func (n *Node) handleExecutions(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if e := validateID(id); e != nil {
		writeError(w, e)
		return
	}
	if n.routedNoBody(w, r, id) {
		return
	}
	limit := n.cfg.HistoryLimit
	if s := r.URL.Query().Get("limit"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 || v > n.cfg.HistoryLimit {
			writeError(w, invalid("limit", "limit must be an integer in 1..%d", n.cfg.HistoryLimit))
			return
		}
		limit = v
	}
	slot := slots.Of(id)
	if _, err := n.store.Get(slot, id); err != nil {
		if errors.Is(err, storage.ErrNotFound) {
			writeError(w, errNotFound)
			return
		}
		writeError(w, asError(err))
		return
	}
	exs, err := n.store.Executions(slot, id, limit)
	if err != nil {
		writeError(w, asError(err))
		return
	}
	out := make([]ExecutionResponse, len(exs))
	for i := range exs {
		out[i] = executionResponse(&exs[i])
	}
	writeJSON(w, http.StatusOK, struct {
		Executions []ExecutionResponse `json:"executions"`
	}{out})
}

func (n *Node) handleStats(w http.ResponseWriter, _ *http.Request) {
	st, err := n.stats()
	if err != nil {
		writeError(w, asError(err))
		return
	}
	writeJSON(w, http.StatusOK, st)
}

func (n *Node) handleSnapshot(w http.ResponseWriter, r *http.Request) {
	snap, err := n.Snapshot(r.Context())
	if err != nil {
		writeError(w, asError(err))
		return
	}
	writeJSON(w, http.StatusOK, snap)
}

func (n *Node) handleHealth(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// handleReady answers 200 {"status":"ready"} on a ready healthy node, 200
// {"status":"degraded","reasons":[...]} on a ready node the safety net
// flags (overdue tasks), and 503 with the error shape, plus "status" and
// "reasons", while it is not ready: loading, joining, taking slots over,
// or owning slots it does not fire (stalled ones among the reasons).
func (n *Node) handleReady(w http.ResponseWriter, _ *http.Request) {
	reasons := n.healthReasons()
	if !n.Ready() {
		msg := n.notReadyReason()
		status := "not_ready"
		if len(reasons) > 0 {
			status, msg = "degraded", msg+"; "+strings.Join(reasons, "; ")
		}
		w.Header().Set("Retry-After", "1")
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"status": status, "reasons": append([]string{n.notReadyReason()}, reasons...),
			"error": &Error{Code: CodeUnavailable, Message: msg}})
		return
	}
	if len(reasons) > 0 {
		writeJSON(w, http.StatusOK, map[string]any{"status": "degraded", "reasons": reasons})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

func (n *Node) handleMetrics(w http.ResponseWriter, r *http.Request) {
	if n.metrics == nil {
		writeError(w, errStopping)
		return
	}
	n.metrics.handler.ServeHTTP(w, r)
}

// handleTestCallback is a built-in callback receiver for trying Chime
// without writing one: it answers ?status= (default 200) after ?delay_ms=
// (default 0, at most 60000) and echoes the fire's headers, and checks
// X-Chime-Signature with this node's signing keys ("signature": valid,
// invalid, expired, missing, or "no key" when the node has none). The
// verdict is reported, not enforced: the status stays ?status=.
func (n *Node) handleTestCallback(w http.ResponseWriter, r *http.Request) {
	status := http.StatusOK
	if s := r.URL.Query().Get("status"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 200 || v > 599 {
			writeError(w, invalid("status", "status must be an HTTP status code 200..599"))
			return
		}
		status = v
	}
	if s := r.URL.Query().Get("delay_ms"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 0 || v > 60000 {
			writeError(w, invalid("delay_ms", "delay_ms must be 0..60000"))
			return
		}
		select {
		case <-time.After(time.Duration(v) * time.Millisecond):
		case <-r.Context().Done():
			return
		}
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20+1))
	sig := dispatch.SignatureInvalid
	switch {
	case err != nil || len(body) > 1<<20:
		_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, 1<<20)) // too large to check: invalid
	default:
		sig = dispatch.VerifySignature(r.Header.Get("X-Chime-Signature"), r.Header.Get("X-Chime-Fire-Id"), body, n.signingKeys(), time.Now())
	}
	writeJSON(w, status, map[string]string{
		"task_id":   r.Header.Get("X-Chime-Task-Id"),
		"fire_id":   r.Header.Get("X-Chime-Fire-Id"),
		"due_at":    r.Header.Get("X-Chime-Due-At"),
		"attempt":   r.Header.Get("X-Chime-Attempt"),
		"signature": sig,
	})
}

// signingKeys returns the node's callback signing keys, current first.
func (n *Node) signingKeys() [][]byte {
	var keys [][]byte
	for _, k := range [][]byte{n.cfg.Dispatch.SigningKey, n.cfg.Dispatch.SigningKeyNext} {
		if len(k) > 0 {
			keys = append(keys, k)
		}
	}
	return keys
}
