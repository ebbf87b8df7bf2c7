package httpapi

// This file serves POST /v1/tasks:retry: fire many failed tasks again,
// by id or by filter, a bounded number per request.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/chime-scheduler/chime/slots"
	"github.com/chime-scheduler/chime/storage"
)

// maxRetryTasks bounds the tasks one POST /v1/tasks:retry retries (ids
// given, or limit of a filter).
const maxRetryTasks = 1000

// retryParallel is how many retries one request has in flight at once.
const retryParallel = 8

// retryRequest is the body of POST /v1/tasks:retry: ids, or a filter.
type retryRequest struct {
	IDs    []string `json:"ids"`
	Status *string  `json:"status"`
	Label  *string  `json:"label"`
	Since  *string  `json:"since"`
	Until  *string  `json:"until"`
	Cursor *string  `json:"cursor"`
	Limit  *int     `json:"limit"`
	// FlowKey retries only the tasks of that flow key (API.md "Flow keys").
	FlowKey *string `json:"flow_key"`
}

// RetryResult is one task of the answer of POST /v1/tasks:retry.
type RetryResult struct {
	ID     string `json:"id"`
	Status int    `json:"status"`
	Error  *Error `json:"error,omitempty"`
}

// RetryAnswer is the answer of POST /v1/tasks:retry.
type RetryAnswer struct {
	Retried    int           `json:"retried"`
	Results    []RetryResult `json:"results"`
	More       bool          `json:"more"`
	NextCursor string        `json:"next_cursor,omitempty"`
}

// retryFilter is a validated filter of POST /v1/tasks:retry.
type retryFilter struct {
	list         listQuery
	since, until int64
}

func (s *Server) parseRetry(body []byte) (ids []string, f *retryFilter, e *Error) {
	var req retryRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		field := ""
		if name, ok := strings.CutPrefix(err.Error(), `json: unknown field "`); ok {
			field = strings.TrimSuffix(name, `"`)
		}
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			field = te.Field
		}
		return nil, nil, Invalid(clip(field), "body must be {\"ids\":[…]} or a filter {\"status\":\"failed\",…}: %v", err)
	}
	if dec.More() {
		return nil, nil, Invalid("", "the body holds more than one JSON value")
	}
	filter := req.Status != nil || req.Label != nil || req.Since != nil || req.Until != nil || req.Cursor != nil || req.Limit != nil || req.FlowKey != nil
	if req.IDs != nil {
		if filter {
			return nil, nil, Invalid("ids", "give ids or a filter, not both")
		}
		if len(req.IDs) == 0 {
			return nil, nil, Invalid("ids", "no ids given")
		}
		if len(req.IDs) > maxRetryTasks {
			return nil, nil, Invalid("ids", "at most %d ids per request", maxRetryTasks)
		}
		seen := make(map[string]bool, len(req.IDs))
		for _, id := range req.IDs {
			if id == "" {
				return nil, nil, Invalid("ids", "an id is empty")
			}
			if e := validateID(id); e != nil {
				e.Field = "ids"
				return nil, nil, e
			}
			if seen[id] {
				return nil, nil, Invalid("ids", "id %q is given twice", id)
			}
			seen[id] = true
		}
		return req.IDs, nil, nil
	}
	if req.Status == nil || *req.Status != "failed" {
		return nil, nil, Invalid("status", `give ids, or a filter with "status":"failed" (only failed tasks can be retried)`)
	}
	f = &retryFilter{list: listQuery{limit: defaultListLimit, status: storage.StatusFailed}}
	if req.Limit != nil {
		if *req.Limit < 1 || *req.Limit > maxRetryTasks {
			return nil, nil, Invalid("limit", "limit must be an integer in 1..%d", maxRetryTasks)
		}
		f.list.limit = *req.Limit
	}
	if req.Label != nil {
		k, v, ok := bytesCut(*req.Label)
		if !ok {
			return nil, nil, Invalid("label", "label filter must be key:value")
		}
		f.list.labelKey, f.list.labelVal, f.list.hasLabel = k, v, true
	}
	if req.FlowKey != nil {
		if e := validateFlowKey("flow_key", *req.FlowKey); e != nil {
			return nil, nil, e
		}
		f.list.flowKey = *req.FlowKey
	}
	now := s.b.Now()
	if req.Since != nil {
		if f.since, e = parseInstant("since", *req.Since, now); e != nil {
			return nil, nil, e
		}
	}
	if req.Until != nil {
		if f.until, e = parseInstant("until", *req.Until, now); e != nil {
			return nil, nil, e
		}
		if f.until <= f.since {
			return nil, nil, Invalid("until", "must be after since")
		}
	}
	if req.Cursor != nil {
		p, ok := decodeCursor(*req.Cursor)
		if !ok {
			return nil, nil, Invalid("cursor", "malformed cursor")
		}
		f.list.start = p
	}
	return nil, f, nil
}

func bytesCut(s string) (k, v string, ok bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == ':' {
			return s[:i], s[i+1:], i > 0
		}
	}
	return "", "", false
}

func (s *Server) handleRetryMany(w http.ResponseWriter, r *http.Request) {
	body, e := ReadBody(w, r, s.cfg.Limits.MaxBodyBytes)
	if e != nil {
		WriteError(w, e)
		return
	}
	ids, f, e := s.parseRetry(body)
	if e != nil {
		WriteError(w, e)
		return
	}
	var ans RetryAnswer
	if f != nil {
		// The failed tasks of one listing page (its bounded scan), with
		// the listing's cursor to go on from.
		var page ListPage
		var err error
		if s.cfg.Clustered {
			lr := r.Clone(r.Context())
			lr.Method = http.MethodGet
			lr.URL = &url.URL{Path: "/v1/tasks", RawQuery: f.list.rawQuery()}
			page, err = s.listCluster(lr, f.list)
		} else {
			page, err = s.localPage(f.list, nil)
		}
		if err != nil {
			WriteError(w, AsError(err))
			return
		}
		for i := range page.Tasks {
			t := &page.Tasks[i]
			if f.since != 0 || f.until != 0 {
				if t.LastFire == nil {
					continue
				}
				at, err := time.Parse(time.RFC3339Nano, t.LastFire.FinishedAt)
				if err != nil || at.UnixNano() < f.since || (f.until != 0 && at.UnixNano() >= f.until) {
					continue
				}
			}
			ids = append(ids, t.ID)
		}
		ans.NextCursor, ans.More = page.NextCursor, page.NextCursor != ""
	}
	ans.Results = s.retryAll(r, ids)
	for _, res := range ans.Results {
		if res.Error == nil {
			ans.Retried++
		}
	}
	WriteJSON(w, http.StatusOK, ans)
}

// rawQuery is q as the query of GET /v1/tasks (and its per-node part).
func (q listQuery) rawQuery() string {
	v := url.Values{}
	v.Set("limit", strconv.Itoa(q.limit))
	if q.status != 0 {
		v.Set("status", q.status.String())
	}
	if q.hasLabel {
		v.Set("label", q.labelKey+":"+q.labelVal)
	}
	if q.flowKey != "" {
		v.Set("flow_key", q.flowKey)
	}
	if q.start != (storage.Position{}) {
		v.Set("cursor", encodeCursor(q.start))
	}
	return v.Encode()
}

// retryAll retries each task of ids on its owner, a few at a time, and
// answers per task in ids' order.
func (s *Server) retryAll(r *http.Request, ids []string) []RetryResult {
	out := make([]RetryResult, len(ids))
	sem := make(chan struct{}, retryParallel)
	var wg sync.WaitGroup
	for i, id := range ids {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			out[i] = s.retryOne(r, id)
		})
	}
	wg.Wait()
	return out
}

// retryOne retries task id here if this node owns it, else on its owner.
func (s *Server) retryOne(r *http.Request, id string) RetryResult {
	res := RetryResult{ID: id, Status: http.StatusOK}
	fail := func(e *Error) RetryResult {
		res.Status, res.Error = e.HTTPStatus(), e
		return res
	}
	v := s.b.View()
	slot := slots.Of(id)
	if v.Owns(slot) {
		if _, err := s.b.Retry(r.Context(), id); err != nil {
			return fail(AsError(err))
		}
		return res
	}
	owner, ok := v.Owner(slot)
	if !ok {
		return fail(ErrNoOwner)
	}
	hop := s.b.Hops(r, nil)
	if hop >= maxHops {
		return fail(&Error{Code: CodeUnavailable, Message: "not the owner: the slot table is changing"})
	}
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	c, err := s.b.Forward(ctx, owner, http.MethodPost, "/v1/tasks/"+id+"/retry", nil, r.Header, hop+1)
	s.forwarded(err == nil)
	if err != nil {
		return fail(unreachable(owner, err))
	}
	if c.Status != http.StatusOK {
		var eb struct {
			Error *Error `json:"error"`
		}
		if json.Unmarshal(c.Body, &eb) != nil || eb.Error == nil {
			eb.Error = &Error{Code: CodeUnavailable, Message: "retry on " + owner.Name + " failed: " + strconv.Itoa(c.Status)}
		}
		eb.Error.Status = c.Status
		res.Status, res.Error = c.Status, eb.Error
	}
	return res
}
