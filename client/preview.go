package client

// Schedule previews (API.md "Schedule preview"): the next fires of a
// schedule, or of a stored task, with the ones a daylight-saving rule moved
// flagged.

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Preview is the answer of PreviewTask and PreviewSchedule. Its JSON form
// is the API's.
type Preview struct {
	// Timezone is the zone of each fire's Local ("UTC" without one).
	Timezone string        `json:"timezone"`
	Fires    []PreviewFire `json:"fires"`
	// NextTransition is the zone's next UTC offset change after the start,
	// nil for a zone without one.
	NextTransition *Transition `json:"next_transition"`
}

// PreviewFire is one fire of a preview.
type PreviewFire struct {
	At    time.Time `json:"at"`    // in UTC
	Local time.Time `json:"local"` // the same instant in the zone (a fixed offset, as answered)
	// Moved is "gap-shift" (the named local time did not exist; fired at
	// the gap's end), "overlap-second" (the second of a repeated local
	// time) or "".
	Moved string `json:"moved,omitempty"`
}

// Transition is a change of a zone's UTC offset; offsets as "+01:00".
type Transition struct {
	At           time.Time `json:"at"`
	OffsetBefore string    `json:"offset_before"`
	OffsetAfter  string    `json:"offset_after"`
}

// ScheduleSpec is a schedule to preview: exactly one of Cron and Every.
type ScheduleSpec struct {
	Cron     string
	Every    time.Duration // sent in whole milliseconds
	Timezone string        // IANA zone of Cron ("": UTC)
	DST      *DST          // Cron's policy (nil: the default)
	// StartAt starts the window (zero: now): the fires are those of a task
	// created with this start_at. EndAt ends it (zero: no bound).
	StartAt, EndAt time.Time
	N              int // how many fires, 1 to 1000 (0: the node's default, 10)
}

// PreviewSchedule answers the next fires of s (GET /v1/schedule:preview).
// Any node answers.
func (c *Client) PreviewSchedule(ctx context.Context, s ScheduleSpec) (*Preview, error) {
	q := url.Values{}
	if s.Cron != "" {
		q.Set("cron", s.Cron)
	}
	if s.Every != 0 {
		q.Set("every_ms", strconv.FormatInt(s.Every.Milliseconds(), 10))
	}
	if s.Timezone != "" {
		q.Set("timezone", s.Timezone)
	}
	if s.DST != nil {
		if s.DST.Gap != "" {
			q.Set("gap", string(s.DST.Gap))
		}
		if s.DST.Overlap != "" {
			q.Set("overlap", string(s.DST.Overlap))
		}
	}
	if !s.StartAt.IsZero() {
		q.Set("start_at", instant(s.StartAt))
	}
	if !s.EndAt.IsZero() {
		q.Set("end_at", instant(s.EndAt))
	}
	if s.N > 0 {
		q.Set("n", strconv.Itoa(s.N))
	}
	return c.preview(ctx, call{method: http.MethodGet, path: "/v1/schedule:preview", query: q, idempotent: true})
}

// PreviewTask answers the next n fires of the task id from its next due
// time (GET /v1/tasks/{id}/preview; n 0: the node's default, 10).
func (c *Client) PreviewTask(ctx context.Context, id string, n int) (*Preview, error) {
	var q url.Values
	if n > 0 {
		q = url.Values{"n": {strconv.Itoa(n)}}
	}
	return c.preview(ctx, call{method: http.MethodGet, path: taskPath(id) + "/preview", query: q, id: id, idempotent: true})
}

func (c *Client) preview(ctx context.Context, cl call) (*Preview, error) {
	a, err := c.do(ctx, cl)
	if err != nil {
		return nil, err
	}
	p := new(Preview)
	if err := decode(a, p); err != nil {
		return nil, err
	}
	return p, nil
}
