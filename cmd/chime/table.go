package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/chime-scheduler/chime/client"
)

// This file renders API answers as human tables. The views below mirror the
// response shapes in docs/API.md, but every displayed field is a
// text, which accepts any JSON value: a server that sends a number where a
// string was documented (or the reverse) still gets a readable table instead
// of a decode error.

// text is a JSON value kept for display: a JSON string is stored unquoted,
// null as "", and any other value (number, bool, object, array) as its JSON
// text. Decoding into a text never fails.
type text string

// UnmarshalJSON implements json.Unmarshaler.
func (t *text) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*t = text(s)
		return nil
	}
	if string(b) == "null" {
		*t = ""
		return nil
	}
	*t = text(b)
	return nil
}

// taskView is the part of a task answer the tables show.
type taskView struct {
	ID          text `json:"id"`
	CallbackURL text `json:"callback_url"`
	DelayMS     text `json:"delay_ms"`
	DueAt       text `json:"due_at"`
	EveryMS     text `json:"every_ms"`
	Cron        text `json:"cron"`
	Timezone    text `json:"timezone"`
	DST         text `json:"dst"` // a {"gap","overlap"} object, kept as text
	StartAt     text `json:"start_at"`
	EndAt       text `json:"end_at"`
	MaxRuns     text `json:"max_runs"`
	Runs        text `json:"runs"`
	Status      text `json:"status"`
	NextDueAt   text `json:"next_due_at"`
	FireCount   text `json:"fire_count"`
	FailCount   text `json:"fail_count"`
	Owner       text `json:"owner"`
	LastFire    text `json:"last_fire"` // a fireView object; kept as text so odd shapes still print
	AckURL      text `json:"ack_url"`
	NextAckAt   text `json:"next_ack_at"`
	FailReason  text `json:"fail_reason"`
}

// fireView is a task's last_fire.
type fireView struct {
	FireID     text `json:"fire_id"`
	DueAt      text `json:"due_at"`
	FinishedAt text `json:"finished_at"`
	Attempts   text `json:"attempts"`
	StatusCode text `json:"status_code"`
	Error      text `json:"error"`
}

// execView is one record of GET /v1/tasks/{id}/executions.
type execView struct {
	FireID     text `json:"fire_id"`
	DueAt      text `json:"due_at"`
	StartedAt  text `json:"started_at"`
	FinishedAt text `json:"finished_at"`
	Attempt    text `json:"attempt"`
	StatusCode text `json:"status_code"`
	Error      text `json:"error"`
}

// maxErrorCell bounds the ERROR column so one long callback error does not
// push every other row off the screen; --json shows it in full.
const maxErrorCell = 60

// writeTask renders one task as a vertical key/value table.
func writeTask(buf *bytes.Buffer, t taskView) error {
	rows := [][]string{
		{"id", cell(t.ID)},
		{"status", cell(t.Status)},
		{"schedule", cell(text(scheduleText(t)))},
		{"next due", cell(t.NextDueAt)},
		{"callback", cell(t.CallbackURL)},
		{"fires", cell(t.FireCount)},
		{"fails", cell(t.FailCount)},
		{"last fire", cell(text(lastFireText(t.LastFire)))},
	}
	// The ACK phase's rows only on a task that has one (API.md "The ACK phase").
	for _, r := range []struct {
		key string
		v   text
	}{{"ack url", t.AckURL}, {"next ack", t.NextAckAt}, {"fail reason", t.FailReason}} {
		if r.v != "" {
			rows = append(rows, []string{r.key, cell(r.v)})
		}
	}
	return writeTable(buf, rows)
}

// writeTaskList renders tasks one row each, then "next cursor: …" when the
// listing has more pages.
func writeTaskList(buf *bytes.Buffer, tasks []taskView, nextCursor string) error {
	if len(tasks) == 0 {
		buf.WriteString("no tasks\n")
	} else {
		rows := [][]string{{"ID", "STATUS", "SCHEDULE", "NEXT DUE", "FIRES", "FAILS", "OWNER"}}
		for _, t := range tasks {
			rows = append(rows, []string{
				cell(t.ID), cell(t.Status), cell(text(scheduleText(t))), cell(t.NextDueAt),
				cell(t.FireCount), cell(t.FailCount), cell(t.Owner),
			})
		}
		if err := writeTable(buf, rows); err != nil {
			return err
		}
	}
	if nextCursor != "" {
		fmt.Fprintf(buf, "next cursor: %s\n", cell(text(nextCursor)))
	}
	return nil
}

// writeExecutions renders execution records one row each, in answer order
// (the server sends newest first).
func writeExecutions(buf *bytes.Buffer, execs []execView) error {
	if len(execs) == 0 {
		buf.WriteString("no executions\n")
		return nil
	}
	rows := [][]string{{"FIRE ID", "ATTEMPT", "DUE", "STARTED", "FINISHED", "CODE", "ERROR"}}
	for _, e := range execs {
		rows = append(rows, []string{
			cell(e.FireID), cell(e.Attempt), cell(e.DueAt), cell(e.StartedAt), cell(e.FinishedAt),
			cell(nonZero(e.StatusCode)), shorten(cell(e.Error), maxErrorCell),
		})
	}
	return writeTable(buf, rows)
}

// writePreview renders a schedule preview: one row per fire (UTC, local
// time with its offset, the DST rule that moved it), then the zone's next
// offset change.
func writePreview(buf *bytes.Buffer, p *client.Preview) error {
	if len(p.Fires) == 0 {
		buf.WriteString("no fires\n")
	} else {
		rows := [][]string{{"#", "AT (UTC)", "LOCAL (" + cell(text(p.Timezone)) + ")", "MOVED"}}
		for i, f := range p.Fires {
			rows = append(rows, []string{
				fmt.Sprint(i + 1), f.At.UTC().Format(time.RFC3339Nano), f.Local.Format(time.RFC3339Nano), cell(text(f.Moved)),
			})
		}
		if err := writeTable(buf, rows); err != nil {
			return err
		}
	}
	if tr := p.NextTransition; tr != nil {
		fmt.Fprintf(buf, "next transition: %s (%s → %s)\n", tr.At.UTC().Format(time.RFC3339), cell(text(tr.OffsetBefore)), cell(text(tr.OffsetAfter)))
	} else {
		fmt.Fprintf(buf, "next transition: none (%s has no offset change ahead)\n", cell(text(p.Timezone)))
	}
	return nil
}

// writeTable aligns rows into columns two spaces apart. Cells must already
// be free of tabs and newlines (see cell).
func writeTable(buf *bytes.Buffer, rows [][]string) error {
	var raw bytes.Buffer
	for _, r := range rows {
		raw.WriteString(strings.Join(r, "\t"))
		raw.WriteByte('\n')
	}
	tw := tabwriter.NewWriter(buf, 0, 0, 2, ' ', 0)
	if _, err := tw.Write(raw.Bytes()); err != nil {
		return err
	}
	return tw.Flush()
}

// scheduleText describes a task's schedule in one line, e.g.
// "cron 0 9 * * 1-5 (Europe/Berlin)", "cron 30 2 * * * (Europe/Berlin) dst
// gap skip, overlap first", "every 30s from 2030-01-01T00:00:00Z",
// "once at 2030-01-01T00:00:00Z" or "once after 5s".
func scheduleText(t taskView) string {
	var s string
	switch {
	case t.Cron != "":
		s = "cron " + string(t.Cron)
		if t.Timezone != "" {
			s += " (" + string(t.Timezone) + ")"
		}
		if t.DST != "" {
			var d struct{ Gap, Overlap text }
			if json.Unmarshal([]byte(t.DST), &d) == nil {
				s += " dst gap " + cell(d.Gap) + ", overlap " + cell(d.Overlap)
			} else {
				s += " dst " + cell(t.DST)
			}
		}
	case t.EveryMS != "":
		s = "every " + millisText(t.EveryMS)
	case t.DueAt != "":
		return "once at " + string(t.DueAt)
	case t.DelayMS != "":
		return "once after " + millisText(t.DelayMS)
	default:
		return ""
	}
	if t.StartAt != "" {
		s += " from " + string(t.StartAt)
	}
	if t.EndAt != "" {
		s += " until " + string(t.EndAt)
	}
	if t.MaxRuns != "" {
		s += " max " + cell(t.MaxRuns) + " runs"
		if t.Runs != "" {
			s += " (" + cell(t.Runs) + " done)"
		}
	}
	return s
}

// millisText shows a millisecond count as a Go duration ("1m30s"), or the
// raw value with an "ms" suffix when it is not an integer.
func millisText(ms text) string {
	n, err := strconv.ParseInt(string(ms), 10, 64)
	if err != nil || n > int64(time.Duration(1<<63-1)/time.Millisecond) || n < 0 {
		return string(ms) + "ms"
	}
	return (time.Duration(n) * time.Millisecond).String()
}

// lastFireText summarizes last_fire, e.g.
// `2030-01-01T00:00:00Z, code 500, 4 attempts, error: "timeout"`. A value
// that is not a last_fire object is shown as it came.
func lastFireText(raw text) string {
	if raw == "" {
		return ""
	}
	var f fireView
	if err := json.Unmarshal([]byte(raw), &f); err != nil {
		return string(raw)
	}
	var parts []string
	if f.DueAt != "" {
		parts = append(parts, string(f.DueAt))
	}
	if c := nonZero(f.StatusCode); c != "" {
		parts = append(parts, "code "+string(c))
	}
	if f.Attempts != "" {
		unit := " attempts"
		if f.Attempts == "1" {
			unit = " attempt"
		}
		parts = append(parts, string(f.Attempts)+unit)
	}
	if f.Error != "" {
		parts = append(parts, "error: "+strconv.Quote(shorten(string(f.Error), maxErrorCell)))
	}
	return strings.Join(parts, ", ")
}

// nonZero maps a status code of 0 (no HTTP answer) to "".
func nonZero(code text) text {
	if code == "0" {
		return ""
	}
	return code
}

// cell makes a value safe for one tabwriter cell: control characters
// (tabs, newlines) become spaces so odd server output cannot break the
// table's shape, and an empty value shows as "-".
func cell(v text) string {
	s := strings.TrimSpace(strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, string(v)))
	if s == "" {
		return "-"
	}
	return s
}

// shorten cuts s to at most n runes, marking the cut with "…".
func shorten(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
