package httpapi

// This file serves GET /v1/stats/due, the load due ahead: how many fires
// the due index holds per hour over the next hours (and per minute over
// the next hour), per node or for the busiest slots. Each node counts the
// slots it owns (a follower's replica is its owner's to count) with a
// bounded scan (the store's CountDue); the node asked gathers every
// member's row from GET /internal/v1/stats/due, and lists a member that
// does not answer as unavailable.

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/chime-scheduler/chime/ring"
	"github.com/chime-scheduler/chime/storage"
)

// Due load limits.
const (
	// DefaultDueScanKeys is the default key budget of one node's count
	// (Config.DueScanKeys): a day of a million due tasks spread over every
	// slot fits (it visits ~1.13M keys: storage BenchmarkCountDue).
	DefaultDueScanKeys = 2_000_000
	maxDueHours        = 168
	defaultDueHours    = 24
	// dueTopSlots is how many of the busiest slots by=slot answers.
	dueTopSlots = 50
	maxNodeName = 256
)

// dueQuery is a parsed GET /v1/stats/due (or its per-node part).
type dueQuery struct {
	hours  int
	bySlot bool
	hour   int    // -1: the whole window
	node   string // "": every member
	at     int64  // the window's start (internal part only; else now)
}

// parseDueQuery parses and validates the query; internal accepts at=.
func (s *Server) parseDueQuery(r *http.Request, internal bool) (dueQuery, *Error) {
	q := r.URL.Query()
	for k, v := range q {
		switch k {
		case "hours", "by", "hour", "node":
		case "at":
			if !internal {
				return dueQuery{}, Invalid(k, "unknown parameter %q", k)
			}
		default:
			return dueQuery{}, Invalid(k, "unknown parameter %q", clip(k))
		}
		if len(v) > 1 {
			return dueQuery{}, Invalid(k, "given %d times", len(v))
		}
	}
	dq := dueQuery{hours: defaultDueHours, hour: -1}
	if q.Has("hours") {
		n, err := strconv.Atoi(q.Get("hours"))
		if err != nil || n < 1 || n > maxDueHours {
			return dq, Invalid("hours", "hours must be an integer in 1..%d", maxDueHours)
		}
		dq.hours = n
	}
	switch by := q.Get("by"); {
	case !q.Has("by"), by == "node":
	case by == "slot":
		dq.bySlot = true
	default:
		return dq, Invalid("by", "must be node or slot, got %q", clip(by))
	}
	if q.Has("hour") {
		if !dq.bySlot {
			return dq, Invalid("hour", "hour narrows by=slot only")
		}
		n, err := strconv.Atoi(q.Get("hour"))
		if err != nil || n < 0 || n >= dq.hours {
			return dq, Invalid("hour", "hour must be an integer in 0..%d (a bucket of the %d hours)", dq.hours-1, dq.hours)
		}
		dq.hour = n
	}
	if q.Has("node") {
		dq.node = q.Get("node")
		if dq.node == "" || len(dq.node) > maxNodeName {
			return dq, Invalid("node", "node must be a member's name")
		}
	}
	if q.Has("at") {
		n, err := strconv.ParseInt(q.Get("at"), 10, 64)
		if err != nil || n < 0 || n > 1<<62 {
			return dq, Invalid("at", "at must be Unix nanoseconds")
		}
		dq.at = n
	}
	return dq, nil
}

// DueLoad is the answer of GET /v1/stats/due.
type DueLoad struct {
	// From is the start of the window counted: now, or with hour= that
	// hour bucket's start.
	From  string `json:"from"`
	Hours int    `json:"hours"`
	By    string `json:"by"`
	Hour  *int   `json:"hour,omitempty"`
	// Total and Overdue add up the available nodes' rows.
	Total   int64 `json:"total"`
	Overdue int64 `json:"overdue"`
	// Truncated: some node's count was cut short (its row says until when
	// it is complete); Unavailable: some node did not answer.
	Truncated   bool      `json:"truncated"`
	Unavailable bool      `json:"unavailable"`
	Nodes       []DueNode `json:"nodes"`
	// Slots are the busiest slots over the window (by=slot only), busiest
	// first.
	Slots []DueSlot `json:"slots,omitempty"`
}

// DueNode is one node's row: its owned slots' fires per hour bucket
// (Hours[i] covers [from+i h, from+(i+1) h)) and per minute of the first
// hour.
type DueNode struct {
	Node      string  `json:"node"`
	Available bool    `json:"available"`
	Error     string  `json:"error,omitempty"`
	Hours     []int64 `json:"hours"`
	Minutes   []int64 `json:"minutes"`
	Total     int64   `json:"total"`
	// Overdue counts fires already due (before from) that have not fired
	// yet: in no bucket. OverdueComplete is false when the budget ran out
	// first (a lower bound).
	Overdue         int64 `json:"overdue"`
	OverdueComplete bool  `json:"overdue_complete"`
	// Truncated: the key budget ran out; counts are exact before
	// CompleteUntil and zero from it on.
	Truncated     bool   `json:"truncated"`
	CompleteUntil string `json:"complete_until,omitempty"`
	KeysScanned   int    `json:"keys_scanned"`
	// Slots is the node's busiest slots (internal part and by=slot).
	Slots []DueSlot `json:"slots,omitempty"`
}

// DueSlot is one slot's count over the window.
type DueSlot struct {
	Slot  uint16 `json:"slot"`
	Node  string `json:"node"`
	Count int64  `json:"count"`
}

// window returns the start and length in hours of the window q counts
// from now.
func (q dueQuery) window(now int64) (int64, int) {
	if q.hour >= 0 {
		return now + int64(q.hour)*int64(time.Hour), 1
	}
	return now, q.hours
}

// dueCacheSlack is how far apart two windows' starts may be for one count
// to answer both: an hour bucket moved by a few seconds is the same load
// to an operator, and every open dashboard asks every 30 s.
const dueCacheSlack = 10 * time.Second

// dueCache runs one count at a time (a count visits up to DueScanKeys
// keys: many dashboards must not scan side by side) and keeps the last
// count of each shape, which answers while nothing was written and no new
// view came (Backend.DueVersion) and its window started within
// dueCacheSlack of the one asked for.
type dueCache struct {
	mu   sync.Mutex
	last map[dueShape]dueCached
}

type dueShape struct {
	hours  int
	bySlot bool
}

type dueCached struct {
	from    int64
	version uint64
	row     DueNode
}

// localDue counts this node's owned slots over [from, from+hours h), or
// answers an unchanged count (dueCache).
func (s *Server) localDue(from int64, hours int, bySlot bool) (DueNode, error) {
	s.due.mu.Lock()
	defer s.due.mu.Unlock()
	k, v := dueShape{hours, bySlot}, s.b.DueVersion()
	if c, ok := s.due.last[k]; ok && c.version == v && from-c.from < int64(dueCacheSlack) && c.from-from < int64(dueCacheSlack) {
		return c.row, nil
	}
	row, err := s.countDue(from, hours, bySlot)
	if err != nil {
		return row, err
	}
	if s.due.last == nil {
		s.due.last = make(map[dueShape]dueCached)
	}
	s.due.last[k] = dueCached{from: from, version: v, row: row}
	return row, nil
}

// countDue counts this node's owned slots over [from, from+hours h).
func (s *Server) countDue(from int64, hours int, bySlot bool) (DueNode, error) {
	budget := s.cfg.DueScanKeys
	if budget <= 0 {
		budget = DefaultDueScanKeys
	}
	c, err := s.b.CountDue(storage.DueCountQuery{From: from, Hours: hours, MaxKeys: budget, PerSlot: bySlot})
	if err != nil {
		return DueNode{}, err
	}
	row := DueNode{Node: s.cfg.Name, Available: true, Hours: c.Hours, Minutes: c.Minutes, Overdue: c.Overdue,
		OverdueComplete: c.OverdueComplete, Truncated: c.Truncated, CompleteUntil: formatInstant(c.CompleteUntil), KeysScanned: c.Keys}
	for _, n := range c.Hours {
		row.Total += n
	}
	for sl, n := range c.Slots {
		row.Slots = append(row.Slots, DueSlot{Slot: sl, Node: s.cfg.Name, Count: n})
	}
	row.Slots = topSlots(row.Slots)
	return row, nil
}

// topSlots sorts ss busiest first (then by slot) and keeps dueTopSlots.
func topSlots(ss []DueSlot) []DueSlot {
	slices.SortFunc(ss, func(a, b DueSlot) int { return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.Slot, b.Slot)) })
	return ss[:min(len(ss), dueTopSlots)]
}

func (s *Server) handleDue(w http.ResponseWriter, r *http.Request) {
	q, e := s.parseDueQuery(r, false)
	if e != nil {
		WriteError(w, e)
		return
	}
	from, hours := q.window(s.b.Now().UnixNano())
	var names []string
	members := s.b.View().Members()
	if s.cfg.Clustered {
		for _, m := range members {
			names = append(names, m.Name)
		}
	} else {
		names = []string{s.cfg.Name}
	}
	if q.node != "" {
		if !slices.Contains(names, q.node) {
			WriteError(w, Invalid("node", "no member is named %q", clip(q.node)))
			return
		}
		names = []string{q.node}
	}
	rows := make([]DueNode, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		if name == s.cfg.Name {
			row, err := s.localDue(from, hours, q.bySlot)
			if err != nil {
				row = DueNode{Node: name, Error: err.Error()}
			}
			rows[i] = row
			continue
		}
		m := members[slices.IndexFunc(members, func(m ring.Member) bool { return m.Name == name })]
		wg.Go(func() {
			by := "node"
			if q.bySlot {
				by = "slot"
			}
			uri := fmt.Sprintf("/internal/v1/stats/due?at=%d&hours=%d&by=%s", from, hours, by)
			rows[i] = DueNode{Node: name}
			c, err := s.b.Forward(r.Context(), m, http.MethodGet, uri, nil, r.Header, 1)
			switch {
			case err != nil:
				rows[i].Error = unreachable(m, err).Message
			case c.Status != http.StatusOK:
				rows[i].Error = fmt.Sprintf("%d %s", c.Status, clip(string(c.Body)))
			default:
				var row DueNode
				if err := json.Unmarshal(c.Body, &row); err != nil || !row.Available || row.Node != name || len(row.Hours) != hours || len(row.Minutes) != 60 {
					rows[i].Error = "malformed answer"
					return
				}
				for j := range row.Slots {
					row.Slots[j].Node = name
				}
				rows[i] = row
			}
		})
	}
	wg.Wait()
	out := DueLoad{From: formatInstant(from), Hours: hours, By: "node", Nodes: rows}
	if q.bySlot {
		out.By = "slot"
		out.Slots = []DueSlot{}
	}
	if q.hour >= 0 {
		out.Hour = &q.hour
	}
	for i := range rows {
		row := &rows[i]
		if !row.Available {
			out.Unavailable = true
			row.Hours, row.Minutes, row.Slots = []int64{}, []int64{}, nil
			continue
		}
		out.Total += row.Total
		out.Overdue += row.Overdue
		out.Truncated = out.Truncated || row.Truncated
		if q.bySlot {
			out.Slots = append(out.Slots, row.Slots...)
		}
		row.Slots = nil
	}
	if q.bySlot {
		out.Slots = topSlots(out.Slots)
	}
	WriteJSON(w, http.StatusOK, out)
}

// handleInternalDue is one node's row of GET /v1/stats/due over the window
// at= the node asked chose. Only other nodes may call it.
func (s *Server) handleInternalDue(w http.ResponseWriter, r *http.Request) {
	if e := s.b.Authenticate(r, "stats_due"); e != nil {
		WriteError(w, e)
		return
	}
	q, e := s.parseDueQuery(r, true)
	if e != nil {
		WriteError(w, e)
		return
	}
	if q.hour >= 0 || q.node != "" || !r.URL.Query().Has("at") {
		WriteError(w, Invalid("at", "the per-node part takes at=, hours= and by= only"))
		return
	}
	row, err := s.localDue(q.at, q.hours, q.bySlot)
	if err != nil {
		WriteError(w, AsError(err))
		return
	}
	WriteJSON(w, http.StatusOK, row)
}
