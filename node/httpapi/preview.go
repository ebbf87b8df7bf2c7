package httpapi

// This file serves the schedule previews (API.md "Schedule preview"):
// GET /v1/schedule:preview for a schedule given in the query, and GET
// /v1/tasks/{id}/preview for a stored task (answered by its owner, like GET
// /v1/tasks/{id}). Both list the next fires in UTC and in the schedule's
// zone, flag those a daylight-saving rule moved, and name the zone's next
// offset change.

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/chime-scheduler/chime/node/schedule"
	"github.com/chime-scheduler/chime/storage"
)

// Preview bounds.
const (
	defaultPreviewN = 10
	maxPreviewN     = 1000
)

// PreviewResponse is the body of both preview endpoints.
type PreviewResponse struct {
	// Timezone is the zone of Local ("UTC" when the schedule has none).
	Timezone string        `json:"timezone"`
	Fires    []PreviewFire `json:"fires"`
	// NextTransition is the zone's next UTC offset change after the
	// preview's start, or null for a zone without one (within 10 years).
	NextTransition *PreviewTransition `json:"next_transition"`
}

// PreviewFire is one fire of a preview.
type PreviewFire struct {
	At    string `json:"at"`              // UTC, RFC 3339
	Local string `json:"local"`           // the same instant in the zone, with its offset
	Moved string `json:"moved,omitempty"` // "gap-shift" or "overlap-second"
}

// PreviewTransition is a change of a zone's UTC offset; offsets as "+01:00".
type PreviewTransition struct {
	At           string `json:"at"`
	OffsetBefore string `json:"offset_before"`
	OffsetAfter  string `json:"offset_after"`
}

// previewQuery reads n and end_at, common to both endpoints.
func previewQuery(q url.Values, now time.Time) (n int, until int64, e *Error) {
	n = defaultPreviewN
	if v := q.Get("n"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 || n > maxPreviewN {
			return 0, 0, Invalid("n", "must be an integer in 1..%d, got %q", maxPreviewN, clip(v))
		}
	}
	if v := q.Get("end_at"); v != "" {
		if until, e = parseInstant("end_at", v, now); e != nil {
			return 0, 0, e
		}
	}
	return n, until, nil
}

// handleSchedulePreview serves GET /v1/schedule:preview?cron=…|every_ms=…
// [&timezone=…][&start_at=…][&end_at=…][&gap=shift|skip][&overlap=first|both][&n=10].
// The schedule is validated as a task's would be (same messages, same
// fields), except that the DST members are the query parameters gap and
// overlap and are named so in errors. Fires are those of a task with
// start_at = the preview's start_at (the first fire at or after it, which
// may be in the past), or, without start_at, of a task created now.
func (s *Server) handleSchedulePreview(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	now := s.b.Now()
	for k := range q {
		switch k {
		case "cron", "every_ms", "timezone", "start_at", "end_at", "gap", "overlap", "n":
		default:
			WriteError(w, Invalid(clip(k), "unknown query parameter %q", clip(k)))
			return
		}
	}
	n, until, e := previewQuery(q, now)
	if e != nil {
		WriteError(w, e)
		return
	}
	req := TaskRequest{CallbackURL: "http://preview.invalid/", Timezone: q.Get("timezone"), StartAt: q.Get("start_at")}
	if q.Has("cron") {
		v := q.Get("cron")
		req.Cron = &v
	}
	if q.Has("every_ms") {
		v, err := strconv.ParseInt(q.Get("every_ms"), 10, 64)
		if err != nil {
			WriteError(w, Invalid(fieldEveryMs, "must be an integer, got %q", clip(q.Get("every_ms"))))
			return
		}
		req.EveryMs = &v
	}
	if q.Has("gap") || q.Has("overlap") {
		req.DST = &DSTRequest{Gap: q.Get("gap"), Overlap: q.Get("overlap")}
	}
	var spec storage.Spec
	if e := req.validateSchedule(now, &spec); e != nil {
		if f, ok := strings.CutPrefix(e.Field, "dst."); ok {
			e.Field = f
		} else if e.Field == "dst" {
			e.Field = "gap"
			if !q.Has("gap") {
				e.Field = "overlap"
			}
		}
		WriteError(w, e)
		return
	}
	start := now
	if spec.StartAt != 0 {
		start = time.Unix(0, spec.StartAt)
	}
	if until != 0 && until < start.UnixNano() {
		WriteError(w, Invalid("end_at", "must not be before start_at"))
		return
	}
	// With a start_at the window starts there, in the past too (what did
	// last March look like?); FirstDue from just before it answers the
	// first fire at or after it.
	first, err := schedule.FirstDue(&spec, start.Add(-time.Nanosecond))
	if spec.StartAt == 0 {
		first, err = schedule.FirstDue(&spec, now)
	}
	if err != nil {
		WriteError(w, Invalid(fieldCron, "%v", err))
		return
	}
	writePreview(w, &spec, first, until, n, start)
}

// handleTaskPreview serves GET /v1/tasks/{id}/preview?n=10[&end_at=…]: the
// stored task's next fires from its next due time, by its own schedule and
// DST policy, stopping at its end_at and after the runs its max_runs leaves.
// A task with nothing due (done, failed, inactive, completed) has none.
func (s *Server) handleTaskPreview(w http.ResponseWriter, r *http.Request) {
	id, ok := s.taskID(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	for k := range q {
		if k != "n" && k != "end_at" {
			WriteError(w, Invalid(clip(k), "unknown query parameter %q", clip(k)))
			return
		}
	}
	now := s.b.Now()
	n, until, e := previewQuery(q, now)
	if e != nil {
		WriteError(w, e)
		return
	}
	t, err := s.b.Get(r.Context(), id)
	if err != nil {
		WriteError(w, AsError(err))
		return
	}
	if t.Spec.MaxRuns > 0 {
		// Runs is at most MaxRuns while the task has a next due time.
		n = int(min(int64(n), t.Spec.MaxRuns-int64(min(t.Runs, uint64(t.Spec.MaxRuns)))))
	}
	writePreview(w, &t.Spec, t.NextDue, until, n, now)
}

// writePreview answers the fires of spec from first and the zone's next
// transition after from.
func writePreview(w http.ResponseWriter, spec *storage.Spec, first, until int64, n int, from time.Time) {
	loc := time.UTC
	tz := "UTC"
	if spec.Kind == storage.KindCron && spec.Timezone != "" {
		l, err := time.LoadLocation(spec.Timezone)
		if err != nil {
			WriteError(w, Invalid("timezone", "unknown timezone %q", clip(spec.Timezone)))
			return
		}
		loc, tz = l, spec.Timezone
	}
	resp := PreviewResponse{Timezone: tz, Fires: []PreviewFire{}}
	if first != 0 {
		for _, f := range schedule.Preview(spec, first, until, n) {
			t := time.Unix(0, f.At)
			resp.Fires = append(resp.Fires, PreviewFire{
				At:    t.UTC().Format(time.RFC3339Nano),
				Local: t.In(loc).Format(time.RFC3339Nano),
				Moved: string(f.Moved),
			})
		}
	}
	if loc != time.UTC {
		if tr, ok, err := schedule.NextTransition(spec.Timezone, from); err == nil && ok {
			resp.NextTransition = &PreviewTransition{
				At:           tr.At.UTC().Format(time.RFC3339),
				OffsetBefore: formatOffset(tr.OffsetBefore),
				OffsetAfter:  formatOffset(tr.OffsetAfter),
			}
		}
	}
	WriteJSON(w, http.StatusOK, resp)
}

// formatOffset renders seconds east of UTC as "+01:00" ("+05:45", "-03:30").
func formatOffset(sec int) string {
	sign := '+'
	if sec < 0 {
		sign, sec = '-', -sec
	}
	return fmt.Sprintf("%c%02d:%02d", sign, sec/3600, sec%3600/60)
}
