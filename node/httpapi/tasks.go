package httpapi

// This file serves the task endpoints: create, put, batch, get, delete,
// pause, resume, trigger and the executions listing.

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/chime-scheduler/chime/node/schedule"
	"github.com/chime-scheduler/chime/slots"
	"github.com/chime-scheduler/chime/storage"
)

// newTask builds the record of a validated task.
func newTask(id string, spec storage.Spec, now time.Time) (*storage.Task, *Error) {
	due, err := schedule.FirstDue(&spec, now)
	if err != nil {
		return nil, Invalid(scheduleField(&spec), "%v", err)
	}
	if due == 0 {
		return nil, Invalid(scheduleField(&spec), "the schedule has no future occurrence")
	}
	if spec.EndAt != 0 && due > spec.EndAt {
		return nil, Invalid("end_at", "is before the first fire (%s)", formatInstant(due))
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
func (s *Server) parseTask(body []byte, pathID string, now time.Time) (t *storage.Task, generated bool, e *Error) {
	req, e := decodeTaskRequest(body)
	if e != nil {
		return nil, false, e
	}
	if pathID != "" {
		if req.ID != "" && req.ID != pathID {
			return nil, false, Invalid("id", "the body's id %q differs from the path's %q", req.ID, pathID)
		}
		req.ID = pathID
	}
	generated = req.ID == ""
	id, spec, e := req.validate(now, s.cfg.Limits)
	if e != nil {
		return nil, false, e
	}
	if err := s.b.CheckCallback(spec.CallbackURL); err != nil {
		return nil, false, Invalid("callback_url", "%s", err.Error())
	}
	if spec.AckURL != "" {
		if err := s.b.CheckCallback(spec.AckURL); err != nil {
			return nil, false, Invalid("ack_url", "%s", err.Error())
		}
	}
	for _, u := range req.chainURLs {
		if err := s.b.CheckCallback(u.url); err != nil {
			return nil, false, Invalid(u.field, "%s", err.Error())
		}
	}
	if t, e = newTask(id, spec, now); e != nil {
		return nil, false, e
	}
	t.Status, _ = req.initialStatus() // checked by validate
	return t, generated, nil
}

func (s *Server) handleCreate(w http.ResponseWriter, r *http.Request) {
	s.writeTask(w, r, false, "")
}

func (s *Server) handlePut(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if e := validateID(id); e != nil {
		WriteError(w, e)
		return
	}
	s.writeTask(w, r, true, id)
}

func (s *Server) writeTask(w http.ResponseWriter, r *http.Request, put bool, pathID string) {
	body, e := ReadBody(w, r, s.cfg.Limits.MaxBodyBytes)
	if e != nil {
		WriteError(w, e)
		return
	}
	now := s.b.Now()
	t, generated, e := s.parseTask(body, pathID, now)
	if e != nil {
		WriteError(w, e)
		return
	}
	if v := s.b.View(); !v.Owns(t.Slot) {
		if generated {
			body = withID(body, t.ID)
		}
		s.routed(w, r, v, t.ID, body)
		return
	}
	out, created, err := s.b.Write(r.Context(), t, put, now)
	if err != nil {
		WriteError(w, AsError(err))
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	WriteJSON(w, status, taskResponse(out, s.cfg.Name))
}

// BatchResult is one entry of the batch answer, in request order.
type BatchResult struct {
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
	bad := func(format string, a ...any) *Error {
		return Invalid("tasks", "body must be {\"tasks\":[…]}: "+format, a...)
	}
	if !json.Valid(body) {
		var raw json.RawMessage
		err := json.Unmarshal(body, &raw) // only to say why
		return nil, bad("%v", err)
	}
	// Valid: split it with jsonScan, each task's raw JSON a slice of body
	// (not a copy), as encoding/json's Decode into []json.RawMessage would
	// have it, at two fifths of its time and a twelfth of its memory
	// (BenchmarkBatchEnvelope). A forwarded batch is split twice, where it
	// arrives and at its owner.
	sc := jsonScan{data: body}
	if sc.peek() != '{' {
		return nil, bad("not an object")
	}
	var tasks []json.RawMessage
	e := sc.object(func(key []byte) *Error {
		if string(key) != "tasks" {
			return bad("unknown field %q", clip(string(key)))
		}
		switch sc.peek() {
		case 'n':
			sc.skipValue()
			tasks = nil
			return nil
		case '[':
		default:
			return bad("\"tasks\" must be an array")
		}
		tasks = tasks[:0] // a repeated key: the last counts, as with encoding/json
		sc.i++            // '['
		if sc.peek() == ']' {
			sc.i++
			return nil
		}
		for {
			start := sc.i
			sc.skipValue()
			if len(tasks) == max {
				return &Error{Code: CodeTooLarge, Status: http.StatusBadRequest, Field: "tasks",
					Message: "at most " + strconv.Itoa(max) + " tasks per batch"}
			}
			tasks = append(tasks, body[start:sc.i])
			if sc.peek() == ']' {
				sc.i++
				return nil
			}
			sc.i++ // ','
			sc.peek()
		}
	})
	if e != nil {
		return nil, e
	}
	if len(tasks) == 0 {
		return nil, Invalid("tasks", "no tasks given")
	}
	return tasks, nil
}

func (s *Server) handleBatch(w http.ResponseWriter, r *http.Request) {
	body, e := ReadBody(w, r, s.cfg.Limits.MaxBodyBytes)
	if e != nil {
		WriteError(w, e)
		return
	}
	var req batchEnvelope
	if req.Tasks, e = decodeBatchEnvelope(body, s.cfg.Limits.MaxBatchTasks); e != nil {
		WriteError(w, e)
		return
	}
	if e := s.b.Overloaded(); e != nil {
		WriteError(w, e)
		return
	}
	now := s.b.Now()
	v := s.b.View()
	results := make([]BatchResult, len(req.Tasks))
	tasks := make([]*storage.Task, len(req.Tasks))
	// routed[i]: task i goes to its slot's owner undecoded (its id is
	// results[i].ID); the owner decodes and validates it.
	routed := make([]bool, len(req.Tasks))
	for i, raw := range req.Tasks {
		results[i].Index = i
		if s.cfg.Clustered { // a standalone node owns every slot
			if id, generated, ok := routeID(raw); ok {
				if _, has := v.Owner(slots.Of(id)); has && !v.Owns(slots.Of(id)) {
					if generated {
						req.Tasks[i] = withID(raw, id)
					}
					routed[i], results[i].ID = true, id
					continue
				}
			}
		}
		t, generated, e := s.parseTask(raw, "", now)
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
	remote := s.splitBatch(r, v, body, req.Tasks, routed, tasks, results)
	var errs []*Error
	if slices.ContainsFunc(tasks, func(t *storage.Task) bool { return t != nil }) {
		var err error
		if errs, err = s.b.CreateBatch(r.Context(), tasks, now); err != nil {
			if remote.n == 0 {
				WriteError(w, AsError(err))
				return
			}
			// Sub-batches went to other nodes and may be stored: answer per
			// task, so a retry can tell which ones to send again.
			e := AsError(err)
			errs = make([]*Error, len(tasks))
			for i := range errs {
				errs[i] = e
			}
		}
	}
	remote.wg.Wait()
	for i := range results {
		if results[i].Error != nil || tasks[i] == nil {
			continue
		}
		if e := errs[i]; e != nil {
			results[i].Status = e.HTTPStatus()
			results[i].Error = e
			continue
		}
		results[i].Status = http.StatusCreated
	}
	WriteJSON(w, http.StatusOK, struct {
		Results []BatchResult `json:"results"`
	}{results})
}

// taskID returns the valid task id of r's path, or answers the refusal,
// or forwards r to the owner of the id's slot; ok reports that r is this
// node's to answer.
func (s *Server) taskID(w http.ResponseWriter, r *http.Request) (id string, ok bool) {
	id = r.PathValue("id")
	if e := validateID(id); e != nil {
		WriteError(w, e)
		return "", false
	}
	if v := s.b.View(); !v.Owns(slots.Of(id)) {
		s.routed(w, r, v, id, nil)
		return "", false
	}
	return id, true
}

func (s *Server) handleGet(w http.ResponseWriter, r *http.Request) {
	id, ok := s.taskID(w, r)
	if !ok {
		return
	}
	t, err := s.b.Get(r.Context(), id)
	if err != nil {
		WriteError(w, AsError(err))
		return
	}
	tr := taskResponse(t, s.cfg.Name)
	if readOnly(r) {
		tr.CallbackURL = RedactURL(tr.CallbackURL)
		tr.SuccessURL, tr.FailureURL = redactOpt(tr.SuccessURL), redactOpt(tr.FailureURL)
	}
	WriteJSON(w, http.StatusOK, tr)
}

func (s *Server) handleDelete(w http.ResponseWriter, r *http.Request) {
	id, ok := s.taskID(w, r)
	if !ok {
		return
	}
	if err := s.b.Delete(r.Context(), id); err != nil {
		WriteError(w, AsError(err))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// handleOne serves pause and resume (trigger and backfill: backfill.go).
func (s *Server) handleOne(act func(Backend, context.Context, string) (*storage.Task, error), status int) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id, ok := s.taskID(w, r)
		if !ok {
			return
		}
		t, err := act(s.b, r.Context(), id)
		if err != nil {
			WriteError(w, AsError(err))
			return
		}
		WriteJSON(w, status, taskResponse(t, s.cfg.Name))
	}
}

func (s *Server) handleExecutions(w http.ResponseWriter, r *http.Request) {
	id, ok := s.taskID(w, r)
	if !ok {
		return
	}
	limit := s.cfg.HistoryLimit
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > s.cfg.HistoryLimit {
			WriteError(w, Invalid("limit", "limit must be an integer in 1..%d", s.cfg.HistoryLimit))
			return
		}
		limit = n
	}
	exs, err := s.b.Executions(r.Context(), id, limit)
	if err != nil {
		WriteError(w, AsError(err))
		return
	}
	out := make([]ExecutionResponse, len(exs))
	for i := range exs {
		out[i] = executionResponse(&exs[i])
	}
	WriteJSON(w, http.StatusOK, struct {
		Executions []ExecutionResponse `json:"executions"`
	}{out})
}
