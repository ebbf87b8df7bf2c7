package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/gorilla/websocket"
)

// TestDashboardCost measures what the dashboard costs on a real cluster of
// five `chime serve` processes on loopback, with some load (periodic
// tasks firing on every node, delayed tasks for the wheel): the websocket
// bytes per push, raw and on the wire with permessage-deflate, over 20 s;
// and the CPU of the node serving the dashboard, and of the others
// answering its member fetches, per minute with nobody watching, with a
// websocket client and with one headless Chromium on the page, in four
// rounds of alternating 30 s windows (CHIME_DASHBOARD_COST_WINDOW changes
// the length). It asserts nothing beyond the run working: the numbers are
// for the README (Dashboard). It takes about seven minutes, so it runs
// only with CHIME_DASHBOARD_COST=1.
func TestDashboardCost(t *testing.T) {
	if os.Getenv("CHIME_DASHBOARD_COST") != "1" {
		t.Skip("a seven-minute measurement: set CHIME_DASHBOARD_COST=1")
	}
	window, cycles := 30*time.Second, 4
	if s := os.Getenv("CHIME_DASHBOARD_COST_WINDOW"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("CHIME_DASHBOARD_COST_WINDOW: %v", err)
		}
		window = d
	}
	procs := startCluster(t, 5)
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	t.Cleanup(sink.Close)

	// 100 tasks firing every second across the cluster, 2,000 due within
	// the hour: every member fires, the wheel and the hosts have data.
	var batch []map[string]any
	for i := range 2100 {
		task := map[string]any{"id": fmt.Sprintf("cost-%04d", i), "callback_url": sink.URL + "/cb"}
		if i < 100 {
			task["every_ms"] = 1000
		} else {
			task["delay_ms"] = 60_000 + (i%60)*60_000
		}
		batch = append(batch, task)
	}
	if code := postJSON(t, procs[0].url+"/v1/tasks:batch", map[string]any{"tasks": batch}, nil); code != http.StatusOK {
		t.Fatalf("batch create = %d, want 200", code)
	}
	time.Sleep(5 * time.Second) // let the rates settle

	// Websocket bytes: a client with permessage-deflate, counting what
	// crosses the socket after the handshake and what each push inflates to.
	var wire atomic.Int64
	d := websocket.Dialer{
		EnableCompression: true,
		HandshakeTimeout:  10 * time.Second,
		NetDialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return countingConn{c, &wire}, nil
		},
	}
	ws, resp, err := d.Dial("ws"+strings.TrimPrefix(procs[0].url, "http")+"/v1/ws", nil)
	if err != nil {
		t.Fatalf("dial: %v (status %d)", err, statusCode(resp))
	}
	if ext := resp.Header.Get("Sec-Websocket-Extensions"); !strings.Contains(ext, "permessage-deflate") {
		t.Fatalf("no permessage-deflate negotiated (extensions %q)", ext)
	}
	base := wire.Load()
	var pushes, raw int
	start := time.Now()
	for time.Since(start) < 20*time.Second {
		_ = ws.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, b, err := ws.ReadMessage()
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		pushes++
		raw += len(b)
	}
	elapsed := time.Since(start).Seconds()
	ws.Close()
	onWire := wire.Load() - base
	t.Logf("websocket, 5 members, %d pushes in %.1f s: %.0f B raw and %.0f B on the wire per push; %.0f B/s on the wire",
		pushes, elapsed, float64(raw)/float64(pushes), float64(onWire)/float64(pushes), float64(onWire)/elapsed)

	// CPU: the serving node (n1) and the other four, per minute, in
	// alternating windows: nobody watching, a websocket client that only
	// reads (the node's side of a browser, without the browser's own
	// rendering competing for the machine's cores), and one headless
	// Chromium on n1's page. Alternating makes drift (the store growing,
	// other work on the machine) fall on every mode alike.
	browser := newBrowser(t)
	tb := newTab(t, browser)
	modes := []string{"nobody", "websocket client", "one browser"}
	sum := make([]struct{ n1, others, secs float64 }, len(modes))
	for cycle := range cycles {
		for mode, label := range modes {
			stop := func() {}
			switch mode {
			case 1:
				stop = readWebsocket(t, procs[0].url)
			case 2:
				tb.do(t, "open the dashboard", chromedp.Navigate(procs[0].url+"/ui/"))
				waitJS(t, tb, "five node rows", `document.querySelectorAll('#nodes tbody tr').length === 5`)
				stop = func() { tb.do(t, "leave the dashboard", chromedp.Navigate("about:blank")) }
			}
			before := make([]float64, len(procs))
			for i, p := range procs {
				before[i] = cpuSeconds(t, p.cmd.Process.Pid)
			}
			t0 := time.Now()
			time.Sleep(window)
			secs := time.Since(t0).Seconds()
			n1 := cpuSeconds(t, procs[0].cmd.Process.Pid) - before[0]
			var others float64
			for i, p := range procs[1:] {
				others += (cpuSeconds(t, p.cmd.Process.Pid) - before[i+1]) / 4
			}
			stop()
			time.Sleep(2 * time.Second) // the socket closes, the hub idles
			s := &sum[mode]
			s.n1, s.others, s.secs = s.n1+n1, s.others+others, s.secs+secs
			t.Logf("cycle %d, %s: n1 %.2f CPU s/min, n2-n5 %.2f each", cycle+1, label, 60*n1/secs, 60*others/secs)
		}
	}
	for mode, label := range modes {
		s := sum[mode]
		t.Logf("%s (%d windows of %v): n1 %.3f CPU s/min; n2-n5 %.3f CPU s/min each", label, cycles, window, 60*s.n1/s.secs, 60*s.others/s.secs)
	}
}

// readWebsocket connects to url's /v1/ws with permessage-deflate and reads
// every push until the returned stop is called.
func readWebsocket(t *testing.T, url string) (stop func()) {
	t.Helper()
	d := websocket.Dialer{EnableCompression: true, HandshakeTimeout: 10 * time.Second}
	ws, resp, err := d.Dial("ws"+strings.TrimPrefix(url, "http")+"/v1/ws", nil)
	if err != nil {
		t.Fatalf("dial: %v (status %d)", err, statusCode(resp))
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			if _, _, err := ws.ReadMessage(); err != nil {
				return
			}
		}
	}()
	return func() {
		ws.Close()
		<-done
	}
}

// countingConn counts the bytes read from a connection.
type countingConn struct {
	net.Conn
	n *atomic.Int64
}

func (c countingConn) Read(p []byte) (int, error) {
	k, err := c.Conn.Read(p)
	c.n.Add(int64(k))
	return k, err
}

// cpuSeconds is the user plus system CPU time of process pid so far, from
// /proc/<pid>/stat.
func cpuSeconds(t *testing.T, pid int) float64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatalf("read CPU time: %v", err)
	}
	// Fields after the parenthesised command name: state is field 3, utime
	// and stime fields 14 and 15.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	return (utime + stime) / clockTicks(t)
}

// clockTicks is the kernel's USER_HZ (getconf CLK_TCK), usually 100.
func clockTicks(t *testing.T) float64 {
	t.Helper()
	out, err := exec.Command("getconf", "CLK_TCK").Output()
	if err != nil {
		return 100
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(string(out)), 64)
	if err != nil || v <= 0 {
		return 100
	}
	return v
}
