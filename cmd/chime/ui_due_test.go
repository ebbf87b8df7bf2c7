package main

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/chime-scheduler/chime/slots"
)

// TestUIDueHeatmap: the dashboard's "Due ahead" heatmap shows, for a known
// set of tasks, the right count in each (node, hour) cell, and a click on
// a cell narrows it to that hour's busiest slots, busiest first.
func TestUIDueHeatmap(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser")
	}
	browser := newBrowser(t)
	const name = "chime-due"
	d := startDashNode(t, name, "")
	tb := newTab(t, browser)

	// Hour 0: 2 tasks; hour 2: 3 in the slot of {x} and 2 in that of {y};
	// hour 9: 4 tasks. The hash tags pin the slots.
	var batch []map[string]any
	add := func(id string, delay time.Duration) {
		batch = append(batch, map[string]any{"id": id, "delay_ms": delay.Milliseconds(), "callback_url": d.srv.URL + "/v1/test/callback"})
	}
	for i := range 2 {
		add(fmt.Sprintf("soon-%d", i), 30*time.Minute+time.Duration(i)*time.Minute)
	}
	for i := range 3 {
		add(fmt.Sprintf("x-%d{x}", i), 150*time.Minute+time.Duration(i)*time.Minute)
	}
	for i := range 2 {
		add(fmt.Sprintf("y-%d{y}", i), 140*time.Minute+time.Duration(i)*time.Minute)
	}
	for i := range 4 {
		add(fmt.Sprintf("late-%d", i), 9*time.Hour+30*time.Minute+time.Duration(i)*time.Minute)
	}
	if code := postJSON(t, d.srv.URL+"/v1/tasks:batch", map[string]any{"tasks": batch}, nil); code != http.StatusOK {
		t.Fatalf("batch create = %d, want 200", code)
	}

	tb.do(t, "open the dashboard", chromedp.Navigate(d.srv.URL+"/ui/"))
	cell := func(hour int) string {
		return fmt.Sprintf(`document.querySelector('#due-heat td[data-node="%s"][data-hour="%d"]')`, name, hour)
	}
	waitJS(t, tb, "the heatmap row", cell(23)+` !== null`)
	got := eval[[]string](t, tb, `[...document.querySelectorAll('#due-heat tbody tr[data-node="`+name+`"] td')].map((c) => c.dataset.count)`)
	want := strings.Split("2,0,5,0,0,0,0,0,0,4,0,0,0,0,0,0,0,0,0,0,0,0,0,0", ",")
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("heatmap counts %v, want %v", got, want)
	}
	if rows := eval[int](t, tb, `document.querySelectorAll('#due-heat tbody tr').length`); rows != 1 {
		t.Errorf("%d heatmap rows, want 1 (one node)", rows)
	}
	// The busiest cell is the brightest; an empty one is not coloured.
	if bg := eval[[]string](t, tb, `[2, 9, 1].map((h) => getComputedStyle(`+"document.querySelector(`#due-heat td[data-hour=\"${h}\"]`)"+`).backgroundColor)`); bg[0] == bg[1] || bg[1] == bg[2] {
		t.Errorf("cell colours %v: the hours 2, 9 and 1 should differ", bg)
	}
	if hint := eval[string](t, tb, `document.getElementById('due-hint').textContent`); !strings.HasPrefix(hint, "11 due in the next 24 h") {
		t.Errorf("hint %q", hint)
	}

	tb.do(t, "click hour 2", chromedp.Click(chromedp.CSS(fmt.Sprintf(`#due-heat td[data-node="%s"][data-hour="2"]`, name))))
	waitJS(t, tb, "the busiest slots", `!document.getElementById('due-slots').hidden && document.getElementById('due-slots').dataset.hour === '2'`)
	slotRows := eval[[]string](t, tb, `[...document.querySelectorAll('#due-slots tbody tr')].map((r) => r.dataset.slot + ':' + r.dataset.count)`)
	if w := []string{fmt.Sprintf("%d:3", slots.Of("{x}")), fmt.Sprintf("%d:2", slots.Of("{y}"))}; strings.Join(slotRows, ",") != strings.Join(w, ",") {
		t.Errorf("busiest slots %v, want %v", slotRows, w)
	}
	if r := eval[string](t, tb, `document.getElementById('due-readout').textContent`); !strings.Contains(r, "5 due") {
		t.Errorf("readout %q", r)
	}
	tb.do(t, "click hour 9", chromedp.Click(chromedp.CSS(fmt.Sprintf(`#due-heat td[data-node="%s"][data-hour="9"]`, name))))
	waitJS(t, tb, "hour 9's slots", `document.getElementById('due-slots').dataset.hour === '9'`)
	var sum int
	for _, r := range eval[[]string](t, tb, `[...document.querySelectorAll('#due-slots tbody tr')].map((r) => r.dataset.count)`) {
		var n int
		fmt.Sscan(r, &n)
		sum += n
	}
	if sum != 4 {
		t.Errorf("hour 9's slots add up to %d, want 4", sum)
	}
	if p := tb.problems(nil); len(p) > 0 {
		t.Errorf("console errors:\n%s", strings.Join(p, "\n"))
	}
}
