package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// DueQuery selects what DueLoad counts. The zero value counts the next 24
// hours per node.
type DueQuery struct {
	// Hours is the window's length, 1..168 (0: the server's default, 24).
	Hours int
	// BySlot also answers the 50 busiest slots over the window.
	BySlot bool
	// Hour, with BySlot, narrows the window to that hour bucket
	// (0..Hours-1); nil: the whole window.
	Hour *int
	// Node asks only that member ("": every member).
	Node string
}

// DueLoad is the answer of GET /v1/stats/due: the fires due ahead.
type DueLoad struct {
	// From is the window's start (now, or the hour bucket's start).
	From  time.Time
	Hours int
	By    string // "node" or "slot"
	Hour  *int
	// Total and Overdue add up the available nodes' rows.
	Total, Overdue int64
	// Truncated: some row was cut short by its node's key budget;
	// Unavailable: some member did not answer (its row says why).
	Truncated, Unavailable bool
	Nodes                  []DueNode
	Slots                  []DueSlot // BySlot only, busiest first
}

// DueNode is one member's row: its owned slots' fires per hour bucket
// (Hours[i] covers [From+i h, From+(i+1) h)) and per minute of the first
// hour.
type DueNode struct {
	Node      string
	Available bool
	Error     string // why an unavailable member has no counts
	Hours     []int64
	Minutes   []int64
	Total     int64
	// Overdue are fires due before From that have not fired (in no
	// bucket); a lower bound unless OverdueComplete.
	Overdue         int64
	OverdueComplete bool
	// Truncated: the key budget ran out; counts are exact before
	// CompleteUntil and zero from it on.
	Truncated     bool
	CompleteUntil time.Time
	KeysScanned   int
}

// DueSlot is one slot's fires over the window.
type DueSlot struct {
	Slot  uint16 `json:"slot"`
	Node  string `json:"node"`
	Count int64  `json:"count"`
}

// DueLoad counts the fires due ahead across the cluster (GET
// /v1/stats/due).
func (c *Client) DueLoad(ctx context.Context, q DueQuery) (DueLoad, error) {
	v := url.Values{}
	if q.Hours != 0 {
		v.Set("hours", strconv.Itoa(q.Hours))
	}
	if q.BySlot {
		v.Set("by", "slot")
	}
	if q.Hour != nil {
		v.Set("hour", strconv.Itoa(*q.Hour))
	}
	if q.Node != "" {
		v.Set("node", q.Node)
	}
	a, err := c.do(ctx, call{method: http.MethodGet, path: "/v1/stats/due", query: v, idempotent: true})
	if err != nil {
		return DueLoad{}, err
	}
	var j struct {
		From        string `json:"from"`
		Hours       int    `json:"hours"`
		By          string `json:"by"`
		Hour        *int   `json:"hour"`
		Total       int64  `json:"total"`
		Overdue     int64  `json:"overdue"`
		Truncated   bool   `json:"truncated"`
		Unavailable bool   `json:"unavailable"`
		Nodes       []struct {
			Node            string  `json:"node"`
			Available       bool    `json:"available"`
			Error           string  `json:"error"`
			Hours           []int64 `json:"hours"`
			Minutes         []int64 `json:"minutes"`
			Total           int64   `json:"total"`
			Overdue         int64   `json:"overdue"`
			OverdueComplete bool    `json:"overdue_complete"`
			Truncated       bool    `json:"truncated"`
			CompleteUntil   string  `json:"complete_until"`
			KeysScanned     int     `json:"keys_scanned"`
		} `json:"nodes"`
		Slots []DueSlot `json:"slots"`
	}
	if err := decode(a, &j); err != nil {
		return DueLoad{}, err
	}
	out := DueLoad{From: parseInstant(j.From), Hours: j.Hours, By: j.By, Hour: j.Hour, Total: j.Total, Overdue: j.Overdue,
		Truncated: j.Truncated, Unavailable: j.Unavailable, Slots: j.Slots}
	for _, n := range j.Nodes {
		out.Nodes = append(out.Nodes, DueNode{Node: n.Node, Available: n.Available, Error: n.Error, Hours: n.Hours,
			Minutes: n.Minutes, Total: n.Total, Overdue: n.Overdue, OverdueComplete: n.OverdueComplete,
			Truncated: n.Truncated, CompleteUntil: parseInstant(n.CompleteUntil), KeysScanned: n.KeysScanned})
	}
	return out, nil
}
