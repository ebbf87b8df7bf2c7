package httpapi

// This file serves GET /v1/executions, the execution log of the cluster:
// every task's executions, newest first, from every node. Each node lists
// the slots it owns from its execution log index (storage/execlog.go);
// the node asked merges.

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"

	"github.com/chime-scheduler/chime/slots"
	"github.com/chime-scheduler/chime/storage"
)

// Execution log limits: a page has at most maxListLimit executions.
const defaultExecLimit = 100

// execQuery is a parsed GET /v1/executions.
type execQuery struct {
	storage.ExecQuery
}

// parseExecQuery parses and validates the query of GET /v1/executions
// (and of its per-node part).
func (s *Server) parseExecQuery(r *http.Request) (execQuery, *Error) {
	q := r.URL.Query()
	for k, v := range q {
		switch k {
		case "status", "task_id", "flow_key", "since", "until", "limit", "cursor":
			if len(v) > 1 {
				return execQuery{}, Invalid(k, "given %d times", len(v))
			}
		default:
			return execQuery{}, Invalid(k, "unknown parameter %q", clip(k))
		}
	}
	eq := execQuery{storage.ExecQuery{Limit: defaultExecLimit}}
	switch st := q.Get("status"); {
	case !q.Has("status"), st == "all":
	case st == "failed":
		eq.Failed = true
	case st == "succeeded":
		eq.Succeeded = true
	default:
		return eq, Invalid("status", "must be failed, succeeded or all, got %q", clip(st))
	}
	if id := q.Get("task_id"); id != "" {
		if e := validateID(id); e != nil {
			e.Field = "task_id"
			return eq, e
		}
		eq.ID, eq.IDSlot = id, slots.Of(id)
	} else if q.Has("task_id") {
		return eq, Invalid("task_id", "must not be empty")
	}
	if k := q.Get("flow_key"); k != "" || q.Has("flow_key") {
		if e := validateFlowKey("flow_key", k); e != nil {
			return eq, e
		}
		// Every task of the key is in its slot, with the key as its id's
		// hash tag: the others are skipped unread; the store then checks
		// each remaining task's flow_key.
		eq.FlowKey = k
		slot := slots.Of(k)
		eq.Match = func(s uint16, id string) bool { return s == slot && slots.HashKey(id) == k }
	}
	now := s.b.Now()
	for _, f := range []struct {
		name string
		dst  *int64
	}{{"since", &eq.Since}, {"until", &eq.Until}} {
		if v := q.Get(f.name); v != "" || q.Has(f.name) {
			ns, e := parseInstant(f.name, v, now)
			if e != nil {
				return eq, e
			}
			*f.dst = ns
		}
	}
	if eq.Since != 0 && eq.Until != 0 && eq.Until <= eq.Since {
		return eq, Invalid("until", "must be after since")
	}
	if v := q.Get("limit"); v != "" || q.Has("limit") {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxListLimit {
			return eq, Invalid("limit", "limit must be an integer in 1..%d", maxListLimit)
		}
		eq.Limit = n
	}
	if c := q.Get("cursor"); c != "" || q.Has("cursor") {
		p, ok := decodeExecCursor(c)
		if !ok {
			return eq, Invalid("cursor", "malformed cursor")
		}
		eq.After = p
	}
	return eq, nil
}

// LoggedExecutionResponse is one execution in GET /v1/executions: the
// task it belongs to and the fields of ExecutionResponse.
type LoggedExecutionResponse struct {
	TaskID string `json:"task_id"`
	ExecutionResponse
	// pos is its place in the log order (not served: the cursor).
	pos storage.ExecPos
}

// ExecPage is the answer of GET /v1/executions, and of its per-node part
// GET /internal/v1/executions (with More and the positions of the
// executions in Positions, which the public answer does not carry).
type ExecPage struct {
	Executions []LoggedExecutionResponse `json:"executions"`
	NextCursor string                    `json:"next_cursor"`
	// Internal part only.
	Positions []string `json:"positions,omitempty"`
	More      bool     `json:"more,omitempty"`
}

// localExecs is this node's part: its owned slots only.
func (s *Server) localExecs(q execQuery) (ExecPage, error) {
	exs, more, err := s.b.RecentExecutions(q.ExecQuery)
	if err != nil {
		return ExecPage{}, err
	}
	page := ExecPage{Executions: make([]LoggedExecutionResponse, len(exs)), More: more}
	for i := range exs {
		e := &exs[i]
		page.Executions[i] = LoggedExecutionResponse{TaskID: e.Pos.ID, ExecutionResponse: executionResponse(&e.Execution), pos: e.Pos}
	}
	return page, nil
}

func (s *Server) handleExecLog(w http.ResponseWriter, r *http.Request) {
	q, e := s.parseExecQuery(r)
	if e != nil {
		WriteError(w, e)
		return
	}
	var pages []ExecPage
	if s.cfg.Clustered {
		var err error
		if pages, err = s.execsCluster(r); err != nil {
			WriteError(w, AsError(err))
			return
		}
	} else {
		p, err := s.localExecs(q)
		if err != nil {
			WriteError(w, AsError(err))
			return
		}
		pages = []ExecPage{p}
	}
	WriteJSON(w, http.StatusOK, mergeExecPages(pages, q.Limit))
}

// handleInternalExecLog is one node's part of GET /v1/executions: its own
// slots only. Only other nodes may call it.
func (s *Server) handleInternalExecLog(w http.ResponseWriter, r *http.Request) {
	if e := s.b.Authenticate(r, "executions"); e != nil {
		WriteError(w, e)
		return
	}
	q, e := s.parseExecQuery(r)
	if e != nil {
		WriteError(w, e)
		return
	}
	page, err := s.localExecs(q)
	if err != nil {
		WriteError(w, AsError(err))
		return
	}
	page.Positions = make([]string, len(page.Executions))
	for i := range page.Executions {
		page.Positions[i] = encodeExecCursor(page.Executions[i].pos)
	}
	WriteJSON(w, http.StatusOK, page)
}

// execsCluster asks every member for its part of the log, in parallel.
// Each answers its newest executions after the cursor in its own slots;
// the union holds the page's executions, whoever owns which slot.
func (s *Server) execsCluster(r *http.Request) ([]ExecPage, error) {
	return gather(s, r, "/internal/v1/executions", "execution log",
		func(func(uint16) bool) (ExecPage, error) {
			q, _ := s.parseExecQuery(r) // parsed already
			return s.localExecs(q)
		}, decodeMemberExecs)
}

// decodeMemberExecs decodes a member's part, with each execution's position.
func decodeMemberExecs(body []byte, p *ExecPage) error {
	if err := json.Unmarshal(body, p); err != nil {
		return err
	}
	if len(p.Positions) != len(p.Executions) {
		return fmt.Errorf("%d positions for %d executions", len(p.Positions), len(p.Executions))
	}
	for i, c := range p.Positions {
		pos, ok := decodeExecCursor(c)
		if !ok || pos.ID != p.Executions[i].TaskID {
			return fmt.Errorf("malformed position %q", c)
		}
		p.Executions[i].pos = pos
	}
	p.Positions = nil
	return nil
}

// mergeExecPages merges the members' parts into one page of at most limit
// executions, newest first. Each part holds its newest executions after
// the cursor, so the newest limit of the union are the page; there is a
// next page when the union has more, or a member said it has.
func mergeExecPages(pages []ExecPage, limit int) ExecPage {
	var all []LoggedExecutionResponse
	more := false
	for _, p := range pages {
		all = append(all, p.Executions...)
		more = more || p.More
	}
	slices.SortFunc(all, func(a, b LoggedExecutionResponse) int {
		switch {
		case b.pos.Less(a.pos):
			return -1
		case a.pos.Less(b.pos):
			return 1
		}
		return 0
	})
	// A slot moving between members may be listed by both.
	all = slices.CompactFunc(all, func(a, b LoggedExecutionResponse) bool { return a.pos == b.pos })
	if len(all) > limit {
		all, more = all[:limit], true
	}
	out := ExecPage{Executions: all}
	if more && len(all) > 0 {
		out.NextCursor = encodeExecCursor(all[len(all)-1].pos)
	}
	if out.Executions == nil {
		out.Executions = []LoggedExecutionResponse{}
	}
	return out
}

// An execution cursor is the log position of the last execution a page
// returned, base64url encoded: finished (8 bytes), slot (2), seq (8), id.
func encodeExecCursor(p storage.ExecPos) string {
	b := binary.BigEndian.AppendUint64(nil, uint64(p.FinishedAt))
	b = binary.BigEndian.AppendUint16(b, p.Slot)
	b = binary.BigEndian.AppendUint64(b, p.Seq)
	return base64.RawURLEncoding.EncodeToString(append(b, p.ID...))
}

func decodeExecCursor(s string) (storage.ExecPos, bool) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) < 19 || len(b) > 18+maxIDLen {
		return storage.ExecPos{}, false
	}
	f := binary.BigEndian.Uint64(b)
	p := storage.ExecPos{Set: true, FinishedAt: int64(f), Slot: binary.BigEndian.Uint16(b[8:]),
		Seq: binary.BigEndian.Uint64(b[10:]), ID: string(b[18:])}
	if f > 1<<63-1 || p.Slot >= slots.Count || p.Slot != slots.Of(p.ID) || validateID(p.ID) != nil ||
		encodeExecCursor(p) != s {
		return storage.ExecPos{}, false
	}
	return p, true
}
