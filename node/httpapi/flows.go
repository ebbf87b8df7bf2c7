package httpapi

// This file serves the flow endpoints (API.md "Flow keys"): PUT, GET and
// DELETE /v1/flows/{key} on the owner of the key's slot (forwarded there
// like a task's request), and GET /v1/flows, the cluster's flows in
// (slot, key) order, each member listing the slots it owns.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"

	"github.com/chime-scheduler/chime/slots"
	"github.com/chime-scheduler/chime/storage"
)

// Bounds of a flow's limits (API.md "Flow keys").
const (
	maxFlowRate        = 100_000    // starts per period; the window remembers each
	maxFlowPeriodMs    = 86_400_000 // a day
	maxFlowParallelism = 100_000
)

// FlowState is a flow's definition and, on its owner, its limiter's state.
type FlowState struct {
	Flow *storage.Flow
	// InFlight are the key's callbacks in flight; RateCount the attempts
	// started in the current rate window (the last period_ms); Waiting
	// the due fires held; OldestWaitingDue the earliest of their due
	// times (Unix ns, 0: none).
	InFlight, RateCount, Waiting int
	OldestWaitingDue             int64
}

// FlowRequest is the body of PUT /v1/flows/{key}.
type FlowRequest struct {
	Rate        *int64 `json:"rate"`
	PeriodMs    *int64 `json:"period_ms"`
	Parallelism *int64 `json:"parallelism"`
}

// FlowResponse is one flow in the answers. The state fields are in the
// answer of GET /v1/flows/{key} only.
type FlowResponse struct {
	Key         string `json:"key"`
	Rate        int64  `json:"rate,omitempty"`
	PeriodMs    int64  `json:"period_ms,omitempty"`
	Parallelism int64  `json:"parallelism,omitempty"`
	Slot        uint16 `json:"slot"`
	Owner       string `json:"owner,omitempty"`
	CreatedAt   string `json:"created_at,omitempty"`
	UpdatedAt   string `json:"updated_at,omitempty"`

	InFlight         *int   `json:"in_flight,omitempty"`
	RateCount        *int   `json:"rate_count,omitempty"`
	Waiting          *int   `json:"waiting,omitempty"`
	OldestWaitingDue string `json:"oldest_waiting_due,omitempty"`
}

func flowResponse(f *storage.Flow, owner string) FlowResponse {
	return FlowResponse{Key: f.Key, Rate: f.Rate, PeriodMs: f.PeriodMs, Parallelism: f.Parallelism, Slot: f.Slot,
		Owner: owner, CreatedAt: formatInstant(f.CreatedAt), UpdatedAt: formatInstant(f.UpdatedAt)}
}

// decodeFlowRequest decodes and validates a PUT body into the limits of
// flow key: rate and period_ms together, parallelism, at least one limit;
// an unknown, repeated or mistyped member is refused naming it.
func decodeFlowRequest(body []byte, key string) (*storage.Flow, *Error) {
	rest := bytes.TrimLeft(body, " \t\r\n")
	if len(rest) == 0 || rest[0] != '{' {
		return nil, Invalid("", "request body must be a JSON object such as {\"rate\":10,\"period_ms\":1000,\"parallelism\":2}")
	}
	var req FlowRequest
	if err := json.Unmarshal(rest, &req); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return nil, Invalid(te.Field, "must be an integer, got %s", te.Value)
		}
		return nil, syntaxError(rest, err)
	}
	s := jsonScan{data: rest}
	seen := map[string]bool{}
	if e := s.object(func(k []byte) *Error {
		name := string(k)
		switch name {
		case "rate", "period_ms", "parallelism":
		default:
			c := clip(name)
			return Invalid(c, "unknown field %q", c)
		}
		if seen[name] {
			return Invalid(name, "field %q given twice", name)
		}
		seen[name] = true
		s.skipValue()
		return nil
	}); e != nil {
		return nil, e
	}
	f := &storage.Flow{Key: key, Slot: slots.Of(key)}
	switch {
	case req.Rate == nil && req.PeriodMs != nil:
		return nil, Invalid("rate", "is required with period_ms")
	case req.Rate != nil && req.PeriodMs == nil:
		return nil, Invalid("period_ms", "is required with rate")
	case req.Rate != nil:
		if *req.Rate < 1 || *req.Rate > maxFlowRate {
			return nil, Invalid("rate", "must be between 1 and %d, got %d", maxFlowRate, *req.Rate)
		}
		if *req.PeriodMs < 1 || *req.PeriodMs > maxFlowPeriodMs {
			return nil, Invalid("period_ms", "must be between 1 and %d (a day), got %d", maxFlowPeriodMs, *req.PeriodMs)
		}
		f.Rate, f.PeriodMs = *req.Rate, *req.PeriodMs
	}
	if req.Parallelism != nil {
		if *req.Parallelism < 1 || *req.Parallelism > maxFlowParallelism {
			return nil, Invalid("parallelism", "must be between 1 and %d, got %d", maxFlowParallelism, *req.Parallelism)
		}
		f.Parallelism = *req.Parallelism
	}
	if f.Rate == 0 && f.Parallelism == 0 {
		return nil, Invalid("rate", "a flow needs a limit: rate with period_ms, parallelism, or both")
	}
	return f, nil
}

// flowKey returns the valid flow key of r's path, or answers the refusal,
// or forwards r to the owner of the key's slot; ok reports that r is this
// node's to answer.
func (s *Server) flowKey(w http.ResponseWriter, r *http.Request, body []byte) (key string, ok bool) {
	key = r.PathValue("key")
	if e := validateFlowKey("key", key); e != nil {
		WriteError(w, e)
		return "", false
	}
	if v := s.b.View(); !v.Owns(slots.Of(key)) {
		s.routed(w, r, v, key, body)
		return "", false
	}
	return key, true
}

func (s *Server) handleFlowPut(w http.ResponseWriter, r *http.Request) {
	body, e := ReadBody(w, r, 64<<10)
	if e != nil {
		WriteError(w, e)
		return
	}
	if e := validateFlowKey("key", r.PathValue("key")); e != nil {
		WriteError(w, e)
		return
	}
	f, e := decodeFlowRequest(body, r.PathValue("key"))
	if e != nil {
		WriteError(w, e)
		return
	}
	if _, ok := s.flowKey(w, r, body); !ok {
		return
	}
	out, created, err := s.b.PutFlow(r.Context(), f)
	if err != nil {
		WriteError(w, AsError(err))
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	WriteJSON(w, status, flowResponse(out, s.cfg.Name))
}

func (s *Server) handleFlowGet(w http.ResponseWriter, r *http.Request) {
	key, ok := s.flowKey(w, r, nil)
	if !ok {
		return
	}
	st, err := s.b.GetFlow(r.Context(), key)
	if err != nil {
		WriteError(w, AsError(err))
		return
	}
	resp := flowResponse(st.Flow, s.cfg.Name)
	resp.InFlight, resp.RateCount, resp.Waiting = &st.InFlight, &st.RateCount, &st.Waiting
	resp.OldestWaitingDue = formatInstant(st.OldestWaitingDue)
	WriteJSON(w, http.StatusOK, resp)
}

func (s *Server) handleFlowDelete(w http.ResponseWriter, r *http.Request) {
	key, ok := s.flowKey(w, r, nil)
	if !ok {
		return
	}
	if err := s.b.DeleteFlow(r.Context(), key); err != nil {
		WriteError(w, AsError(err))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// flowQuery is a parsed GET /v1/flows: limit and cursor, as a task
// listing's (the cursor is a (slot, key) position).
type flowQuery struct {
	limit int
	start storage.Position
}

func parseFlowQuery(r *http.Request) (flowQuery, *Error) {
	q := r.URL.Query()
	fq := flowQuery{limit: defaultListLimit}
	for k, v := range q {
		switch k {
		case "limit", "cursor":
			if len(v) > 1 {
				return fq, Invalid(k, "given %d times", len(v))
			}
		default:
			return fq, Invalid(clip(k), "unknown parameter %q", clip(k))
		}
	}
	if v := q.Get("limit"); v != "" || q.Has("limit") {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxListLimit {
			return fq, Invalid("limit", "limit must be an integer in 1..%d", maxListLimit)
		}
		fq.limit = n
	}
	if c := q.Get("cursor"); c != "" { // "" starts at the beginning, as in GET /v1/tasks
		p, ok := decodeCursor(c)
		if !ok || !storage.ValidFlowKey(p.ID) || slots.Of(p.ID) != p.Slot {
			return fq, Invalid("cursor", "malformed cursor")
		}
		fq.start = p
	}
	return fq, nil
}

// FlowPage is the answer of GET /v1/flows, and of its per-node part GET
// /internal/v1/flows.
type FlowPage struct {
	Flows      []FlowResponse `json:"flows"`
	NextCursor string         `json:"next_cursor"`
}

// localFlows is this node's part of a listing: the flows of the slots
// owned reports true for (nil: all), from q.start, at most q.limit; the
// cursor is the last one's position when there may be more.
func (s *Server) localFlows(q flowQuery, owned func(uint16) bool) (FlowPage, error) {
	page := FlowPage{Flows: []FlowResponse{}}
	more := false
	err := s.b.ScanFlows(q.start, owned, func(f *storage.Flow) bool {
		if len(page.Flows) == q.limit {
			more = true
			return false
		}
		page.Flows = append(page.Flows, flowResponse(f, s.cfg.Name))
		return true
	})
	if more {
		last := page.Flows[len(page.Flows)-1]
		page.NextCursor = encodeCursor(storage.Position{Slot: last.Slot, ID: last.Key, Exclusive: true})
	}
	return page, err
}

func (s *Server) handleFlowList(w http.ResponseWriter, r *http.Request) {
	q, e := parseFlowQuery(r)
	if e != nil {
		WriteError(w, e)
		return
	}
	if !s.cfg.Clustered {
		page, err := s.localFlows(q, nil)
		if err != nil {
			WriteError(w, AsError(err))
			return
		}
		WriteJSON(w, http.StatusOK, page)
		return
	}
	page, err := s.flowsCluster(r, q)
	if err != nil {
		WriteError(w, AsError(err))
		return
	}
	WriteJSON(w, http.StatusOK, page)
}

// handleInternalFlows is one node's part of GET /v1/flows: its own slots
// only. Only other nodes may call it.
func (s *Server) handleInternalFlows(w http.ResponseWriter, r *http.Request) {
	if e := s.b.Authenticate(r, "flows"); e != nil {
		WriteError(w, e)
		return
	}
	q, e := parseFlowQuery(r)
	if e != nil {
		WriteError(w, e)
		return
	}
	page, err := s.localFlows(q, s.b.View().Owns)
	if err != nil {
		WriteError(w, AsError(err))
		return
	}
	WriteJSON(w, http.StatusOK, page)
}

// flowsCluster asks every member for its part, in parallel, and merges
// them as listCluster does tasks: in (slot, key) order, nothing after the
// earliest position a member stopped at.
func (s *Server) flowsCluster(r *http.Request, q flowQuery) (FlowPage, error) {
	pages, err := gather(s, r, "/internal/v1/flows", "flow listing",
		func(owned func(uint16) bool) (FlowPage, error) { return s.localFlows(q, owned) },
		func(body []byte, p *FlowPage) error { return json.Unmarshal(body, p) })
	if err != nil {
		return FlowPage{}, err
	}
	return mergeFlowPages(pages, q.limit)
}

func flowPos(f *FlowResponse) storage.Position {
	return storage.Position{Slot: f.Slot, ID: f.Key, Exclusive: true}
}

// mergeFlowPages merges the members' parts into one page of at most
// limit flows (mergePages for flows).
func mergeFlowPages(pages []FlowPage, limit int) (FlowPage, error) {
	var bound *storage.Position
	var all []FlowResponse
	for _, p := range pages {
		if p.NextCursor != "" {
			stop, ok := decodeCursor(p.NextCursor)
			if !ok {
				return FlowPage{}, fmt.Errorf("node: a member answered a malformed cursor %q", p.NextCursor)
			}
			if bound == nil || comparePos(stop, *bound) < 0 {
				bound = &stop
			}
		}
		all = append(all, p.Flows...)
	}
	slices.SortFunc(all, func(a, b FlowResponse) int { return comparePos(flowPos(&a), flowPos(&b)) })
	all = slices.CompactFunc(all, func(a, b FlowResponse) bool { return a.Slot == b.Slot && a.Key == b.Key })
	if bound != nil {
		k, _ := slices.BinarySearchFunc(all, *bound, func(f FlowResponse, p storage.Position) int {
			if comparePos(flowPos(&f), p) <= 0 {
				return -1
			}
			return 1
		})
		all = all[:k]
	}
	out := FlowPage{Flows: all}
	switch {
	case len(all) > limit:
		out.Flows = all[:limit]
		out.NextCursor = encodeCursor(flowPos(&all[limit-1]))
	case len(all) == limit && bound != nil:
		out.NextCursor = encodeCursor(flowPos(&all[limit-1]))
	case bound != nil:
		out.NextCursor = encodeCursor(*bound)
	}
	if out.Flows == nil {
		out.Flows = []FlowResponse{}
	}
	return out, nil
}
