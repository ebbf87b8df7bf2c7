package httpapi

// This file serves GET /v1/tasks: the query, the cursor, one node's part
// of a listing, and in a cluster the merge of every owner's part.

import (
	"cmp"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/chime-scheduler/chime/slots"
	"github.com/chime-scheduler/chime/storage"
)

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
	flowKey  string // only the tasks of this flow key (all in its slot); "" = any
	start    storage.Position
}

func parseListQuery(r *http.Request) (listQuery, *Error) {
	q := r.URL.Query()
	lq := listQuery{limit: defaultListLimit}
	if s := q.Get("limit"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 || v > maxListLimit {
			return lq, Invalid("limit", "limit must be an integer in 1..%d", maxListLimit)
		}
		lq.limit = v
	}
	if s := q.Get("status"); s != "" {
		st, ok := storage.ParseStatus(s)
		if !ok {
			return lq, Invalid("status", "unknown status %q", s)
		}
		lq.status = st
	}
	if s := q.Get("label"); s != "" {
		k, v, ok := strings.Cut(s, ":")
		if !ok || k == "" {
			return lq, Invalid("label", "label filter must be key:value")
		}
		lq.labelKey, lq.labelVal, lq.hasLabel = k, v, true
	}
	if c := q.Get("cursor"); c != "" {
		p, ok := decodeCursor(c)
		if !ok {
			return lq, Invalid("cursor", "malformed cursor")
		}
		lq.start = p
	}
	if k := q.Get("flow_key"); k != "" || q.Has("flow_key") {
		if e := validateFlowKey("flow_key", k); e != nil {
			return lq, e
		}
		lq.flowKey = k
	}
	return lq, nil
}

// listLocal lists this node's tasks matching q from q.start in key order
// (slot, then id), only in slots owned reports true for (nil: all). It stops
// after q.limit matches or listScanBudget records; stop is then the
// position of the last record read, from which the listing continues.
func (s *Server) listLocal(q listQuery, owned func(uint16) bool) (tasks []TaskResponse, stop *storage.Position, err error) {
	tasks = make([]TaskResponse, 0, min(q.limit, 64))
	var last *storage.Task
	scanned := 0
	more := false
	start, flowSlot := q.start, uint16(0)
	if q.flowKey != "" {
		// Every task of a flow key is in the key's slot: only it is read.
		flowSlot = slots.Of(q.flowKey)
		if start.Slot < flowSlot {
			start = storage.Position{Slot: flowSlot}
		}
		if start.Slot > flowSlot {
			return tasks, nil, nil
		}
	}
	err = s.b.ScanTasks(start, func(t *storage.Task) bool {
		if q.flowKey != "" && t.Slot != flowSlot {
			return false
		}
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
		if q.flowKey != "" && t.Spec.FlowKey != q.flowKey {
			return true
		}
		tasks = append(tasks, taskResponse(t, s.cfg.Name))
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

// ListPage is the answer of GET /v1/tasks, and of its per-node part
// GET /internal/v1/tasks (NextCursor is then the node's stop position).
type ListPage struct {
	Tasks      []TaskResponse `json:"tasks"`
	NextCursor string         `json:"next_cursor"`
}

func (s *Server) handleList(w http.ResponseWriter, r *http.Request) {
	q, e := parseListQuery(r)
	if e != nil {
		WriteError(w, e)
		return
	}
	var page ListPage
	var err error
	if s.cfg.Clustered {
		page, err = s.listCluster(r, q)
	} else {
		page, err = s.localPage(q, nil)
	}
	if err != nil {
		WriteError(w, AsError(err))
		return
	}
	if readOnly(r) {
		redactTasks(page.Tasks)
	}
	WriteJSON(w, http.StatusOK, page)
}

// localPage is this node's part of a listing (listLocal), with the cursor
// of its stop position when it stopped early.
func (s *Server) localPage(q listQuery, owned func(uint16) bool) (ListPage, error) {
	tasks, stop, err := s.listLocal(q, owned)
	page := ListPage{Tasks: tasks}
	if stop != nil {
		page.NextCursor = encodeCursor(*stop)
	}
	return page, err
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

// handleInternalList is one node's part of a cluster-wide listing: its own
// slots only, from the cursor. Only other nodes may call it.
func (s *Server) handleInternalList(w http.ResponseWriter, r *http.Request) {
	if e := s.b.Authenticate(r, "tasks"); e != nil {
		WriteError(w, e)
		return
	}
	q, e := parseListQuery(r)
	if e != nil {
		WriteError(w, e)
		return
	}
	page, err := s.localPage(q, s.b.View().Owns)
	if err != nil {
		WriteError(w, AsError(err))
		return
	}
	WriteJSON(w, http.StatusOK, page)
}

// listCluster answers GET /v1/tasks in a cluster. Every owner lists its own
// slots from the cursor in the same global order (slot, then id), in
// parallel; the page is the merge. A node that stopped early (page full or
// scan budget spent) bounds the page: nothing after its stop position is
// returned, because it may hold tasks before it. The cursor is a position
// in that global order, so it stays valid whichever node holds a slot.
func (s *Server) listCluster(r *http.Request, q listQuery) (ListPage, error) {
	pages, err := gather(s, r, "/internal/v1/tasks", "listing",
		func(owned func(uint16) bool) (ListPage, error) { return s.localPage(q, owned) },
		func(body []byte, p *ListPage) error { return json.Unmarshal(body, p) })
	if err != nil {
		return ListPage{}, err
	}
	return mergePages(pages, q.limit)
}

// gather asks every member for its part of a cluster-wide listing, in
// parallel: this node through local (given the view's ownership), every
// other member through GET path with the request's own query, signed,
// one try (Backend.Forward), its answer decoded by decode. what names the
// listing in errors. The first member that fails fails the listing: a
// page without a member's part would skip its slots.
func gather[P any](s *Server, r *http.Request, path, what string, local func(owned func(uint16) bool) (P, error),
	decode func(body []byte, p *P) error) ([]P, error) {
	v := s.b.View()
	members := v.Members()
	if len(members) == 0 {
		return nil, ErrNoOwner
	}
	pages := make([]P, len(members))
	errs := make([]error, len(members))
	var wg sync.WaitGroup
	for i, m := range members {
		if m.Name == s.cfg.Name {
			pages[i], errs[i] = local(v.Owns)
			continue
		}
		wg.Go(func() {
			uri := path
			if r.URL.RawQuery != "" {
				uri += "?" + r.URL.RawQuery // "?" alone would not reach the member as signed
			}
			c, err := s.b.Forward(r.Context(), m, http.MethodGet, uri, nil, r.Header, 1)
			switch {
			case err != nil:
				errs[i] = unreachable(m, err)
			case c.Status != http.StatusOK:
				errs[i] = &Error{Code: CodeUnavailable, Message: fmt.Sprintf("%s on %s failed: %d %s", what, m.Name, c.Status, clip(string(c.Body)))}
			default:
				if err := decode(c.Body, &pages[i]); err != nil {
					errs[i] = &Error{Code: CodeInternal, Message: fmt.Sprintf("%s on %s: %v", what, m.Name, err)}
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return pages, nil
}

// posOf is a task's position in the global listing order.
func posOf(t *TaskResponse) storage.Position {
	return storage.Position{Slot: t.Slot, ID: t.ID, Exclusive: true}
}

func comparePos(a, b storage.Position) int {
	return cmp.Or(cmp.Compare(a.Slot, b.Slot), cmp.Compare(a.ID, b.ID))
}

// mergePages merges the per-node pages of one listing into one page of at
// most limit tasks (see listCluster).
func mergePages(pages []ListPage, limit int) (ListPage, error) {
	var bound *storage.Position
	var all []TaskResponse
	for _, p := range pages {
		if p.NextCursor != "" {
			stop, ok := decodeCursor(p.NextCursor)
			if !ok {
				return ListPage{}, fmt.Errorf("node: a member answered a malformed cursor %q", p.NextCursor)
			}
			if bound == nil || comparePos(stop, *bound) < 0 {
				bound = &stop
			}
		}
		all = append(all, p.Tasks...)
	}
	slices.SortFunc(all, func(a, b TaskResponse) int { return comparePos(posOf(&a), posOf(&b)) })
	all = slices.CompactFunc(all, func(a, b TaskResponse) bool { return a.Slot == b.Slot && a.ID == b.ID })
	if bound != nil {
		k, _ := slices.BinarySearchFunc(all, *bound, func(t TaskResponse, p storage.Position) int {
			if comparePos(posOf(&t), p) <= 0 {
				return -1
			}
			return 1
		})
		all = all[:k]
	}
	out := ListPage{Tasks: all}
	switch {
	case len(all) > limit:
		out.Tasks = all[:limit]
		out.NextCursor = encodeCursor(posOf(&all[limit-1]))
	case len(all) == limit && bound != nil:
		out.NextCursor = encodeCursor(posOf(&all[limit-1]))
	case bound != nil:
		out.NextCursor = encodeCursor(*bound)
	}
	if out.Tasks == nil {
		out.Tasks = []TaskResponse{}
	}
	return out, nil
}
