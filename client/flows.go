package client

// The flow endpoints (API.md "Flow keys"): a flow key's limits, defined
// per key, on the owner of the key's slot.

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// MaxFlowKeyLen is the longest flow key, in bytes.
const MaxFlowKeyLen = 128

// FlowLimits are a flow key's limits. A zero limit is not set; a flow
// needs at least one: Rate with Period, Parallelism, or both.
type FlowLimits struct {
	// Rate is how many attempts of the key's callbacks may start in any
	// window of Period (1..100000), with Period (1 ms..24 h, sent in
	// whole milliseconds, truncated).
	Rate   int
	Period time.Duration
	// Parallelism is how many callbacks of the key may be in flight at
	// once (1..100000).
	Parallelism int
}

// Flow is a flow key's definition as a node answers it, with its
// limiter's state when GetFlow asked for it.
type Flow struct {
	Key string
	FlowLimits
	Slot      uint16 // slots.Of(Key): the slot of the key's tasks
	Owner     string // the name of the node that answered: the slot's owner
	CreatedAt time.Time
	UpdatedAt time.Time
	// State is the limiter's state on the owner: GetFlow's answer has
	// it, PutFlow's and Flows' do not (nil).
	State *FlowState
}

// FlowState is a flow key's limiter's state on the owner of its slot.
type FlowState struct {
	InFlight  int // callbacks of the key in flight
	RateCount int // attempts started in the last Period
	Waiting   int // due fires held by the limits
	// OldestWaitingDue is the earliest due time among the waiting fires
	// (zero when none wait).
	OldestWaitingDue time.Time
}

// flowJSON is a flow on the wire (API.md "Flow keys").
type flowJSON struct {
	Key         string `json:"key"`
	Rate        int    `json:"rate,omitempty"`
	PeriodMs    int64  `json:"period_ms,omitempty"`
	Parallelism int    `json:"parallelism,omitempty"`
	Slot        uint16 `json:"slot"`
	Owner       string `json:"owner,omitempty"`
	CreatedAt   string `json:"created_at,omitempty"`
	UpdatedAt   string `json:"updated_at,omitempty"`

	InFlight         *int   `json:"in_flight,omitempty"`
	RateCount        *int   `json:"rate_count,omitempty"`
	Waiting          *int   `json:"waiting,omitempty"`
	OldestWaitingDue string `json:"oldest_waiting_due,omitempty"`
}

func (w *flowJSON) flow() Flow {
	f := Flow{Key: w.Key, FlowLimits: FlowLimits{Rate: w.Rate, Period: ms(w.PeriodMs), Parallelism: w.Parallelism},
		Slot: w.Slot, Owner: w.Owner, CreatedAt: parseInstant(w.CreatedAt), UpdatedAt: parseInstant(w.UpdatedAt)}
	if w.InFlight != nil || w.RateCount != nil || w.Waiting != nil {
		f.State = &FlowState{InFlight: deref(w.InFlight), RateCount: deref(w.RateCount), Waiting: deref(w.Waiting),
			OldestWaitingDue: parseInstant(w.OldestWaitingDue)}
	}
	return f
}

func deref(p *int) int {
	if p == nil {
		return 0
	}
	return *p
}

// MarshalJSON renders f as a node answers it (API.md "Flow keys"): a
// limit not set is absent, the state only when f has one.
func (f Flow) MarshalJSON() ([]byte, error) {
	w := flowJSON{Key: f.Key, Rate: f.Rate, PeriodMs: f.Period.Milliseconds(), Parallelism: f.Parallelism, Slot: f.Slot,
		Owner: f.Owner, CreatedAt: instant(f.CreatedAt), UpdatedAt: instant(f.UpdatedAt)}
	if s := f.State; s != nil {
		w.InFlight, w.RateCount, w.Waiting = &s.InFlight, &s.RateCount, &s.Waiting
		w.OldestWaitingDue = instant(s.OldestWaitingDue)
	}
	return json.Marshal(w)
}

// UnmarshalJSON reads a flow in the API's shape, leniently: unknown
// fields are ignored, an instant that does not parse is the zero time.
func (f *Flow) UnmarshalJSON(b []byte) error {
	var w flowJSON
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*f = w.flow()
	return nil
}

// ValidFlowKey reports whether key is a flow key a node takes: 1 to 128
// characters of A-Z a-z 0-9 . _ ~ : - (the node's rule). A flow key is
// the hash tag of its tasks' ids, so it has no braces.
func ValidFlowKey(key string) bool {
	if len(key) == 0 || len(key) > MaxFlowKeyLen {
		return false
	}
	for i := 0; i < len(key); i++ {
		switch c := key[i]; {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c == '.', c == '_', c == '~', c == ':', c == '-':
		default:
			return false
		}
	}
	return true
}

// checkFlowKey refuses an invalid key before any request, with the error
// a node would answer: an *Error with Status 400, Code
// "invalid_argument" and Field "key" (it matches ErrInvalid).
func checkFlowKey(key string) error {
	if ValidFlowKey(key) {
		return nil
	}
	e := &Error{Status: http.StatusBadRequest, Code: "invalid_argument", Field: "key"}
	if len(key) == 0 || len(key) > MaxFlowKeyLen {
		e.Message = fmt.Sprintf("must be 1 to %d characters, got %d", MaxFlowKeyLen, len(key))
	} else {
		e.Message = fmt.Sprintf("may contain only A-Z a-z 0-9 . _ ~ : -, got %q", key)
	}
	return e
}

// flowPath is the path of flow key.
func flowPath(key string) string { return "/v1/flows/" + url.PathEscape(key) }

// flowAnswer decodes a flow answer.
func flowAnswer(a answer) (Flow, error) {
	var w flowJSON
	if err := decode(a, &w); err != nil {
		return Flow{}, err
	}
	return w.flow(), nil
}

// PutFlow creates or replaces the limits of flow key and reports which. A
// replace sets the whole definition: a limit not set in l is removed. The
// fires of the key's tasks wait while a limit is reached (API.md "Flow
// keys"). The request goes to the owner of the key's slot and is retried
// like any idempotent request. An invalid key is refused before any
// request (an *Error matching ErrInvalid, Field "key"); an invalid limit
// is the node's 400 naming it.
func (c *Client) PutFlow(ctx context.Context, key string, l FlowLimits) (stored Flow, created bool, err error) {
	if err := checkFlowKey(key); err != nil {
		return Flow{}, false, err
	}
	body := map[string]int64{}
	if l.Rate != 0 || l.Period != 0 {
		body["rate"], body["period_ms"] = int64(l.Rate), l.Period.Milliseconds()
	}
	if l.Parallelism != 0 {
		body["parallelism"] = int64(l.Parallelism)
	}
	b, err := json.Marshal(body)
	if err != nil {
		return Flow{}, false, err
	}
	a, err := c.do(ctx, call{method: http.MethodPut, path: flowPath(key), body: b, id: key, idempotent: true})
	if err != nil {
		return Flow{}, false, err
	}
	stored, err = flowAnswer(a)
	return stored, a.status == http.StatusCreated, err
}

// GetFlow returns flow key's definition and its limiter's state on the
// owner (Flow.State); ErrNotFound when the key has no definition.
func (c *Client) GetFlow(ctx context.Context, key string) (Flow, error) {
	if err := checkFlowKey(key); err != nil {
		return Flow{}, err
	}
	a, err := c.do(ctx, call{method: http.MethodGet, path: flowPath(key), id: key, idempotent: true})
	if err != nil {
		return Flow{}, err
	}
	return flowAnswer(a)
}

// DeleteFlow removes flow key's limits: its held fires go at once, its
// tasks keep their FlowKey and fire unlimited. ErrNotFound when the key
// has no definition (also when a retry follows an attempt that deleted
// it but whose answer was lost).
func (c *Client) DeleteFlow(ctx context.Context, key string) error {
	if err := checkFlowKey(key); err != nil {
		return err
	}
	_, err := c.do(ctx, call{method: http.MethodDelete, path: flowPath(key), id: key, idempotent: true})
	return err
}

// Flows returns the cluster's flow definitions (without their state) in
// (slot, key) order, following the pages' cursors. An error ends the
// sequence: it is yielded once, with a zero Flow. Stopping the loop early
// sends no more requests.
func (c *Client) Flows(ctx context.Context) iter.Seq2[Flow, error] {
	return func(yield func(Flow, error) bool) {
		cursor := ""
		for {
			flows, next, err := c.FlowsPage(ctx, 0, cursor)
			if err != nil {
				yield(Flow{}, err)
				return
			}
			for i := range flows {
				if !yield(flows[i], nil) {
					return
				}
			}
			if next == "" {
				return
			}
			cursor = next
		}
	}
}

// FlowsPage returns one page of Flows: at most limit flows (1..1000; 0:
// the node's default, 100) from cursor on ("": the first page) and the
// cursor of the next page ("" after the last).
func (c *Client) FlowsPage(ctx context.Context, limit int, cursor string) (flows []Flow, next string, err error) {
	q := url.Values{}
	if limit != 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	a, err := c.do(ctx, call{method: http.MethodGet, path: "/v1/flows", query: q, idempotent: true})
	if err != nil {
		return nil, "", err
	}
	var page struct {
		Flows      []flowJSON `json:"flows"`
		NextCursor string     `json:"next_cursor"`
	}
	if err := decode(a, &page); err != nil {
		return nil, "", err
	}
	flows = make([]Flow, len(page.Flows))
	for i := range page.Flows {
		flows[i] = page.Flows[i].flow()
	}
	return flows, page.NextCursor, nil
}
