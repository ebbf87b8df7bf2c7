package dispatch

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chime-scheduler/chime/node/clock"
)

// The request a job becomes and the result a response becomes.

func TestDispatchRequest(t *testing.T) {
	due := time.Date(2025, 3, 4, 5, 6, 7, 123456789, time.FixedZone("X", 3600)).UnixNano()
	tests := []struct {
		name       string
		job        Job
		wantBody   string
		wantHeader map[string]string // "" = must be absent
	}{
		{
			name: "full",
			job: Job{
				TaskID: "task-1", Seq: 7, Due: due, Attempt: 2, Epoch: 5,
				Payload: []byte(`{"a":1}`),
				Headers: map[string]string{
					"x-custom":        "v1",
					"Authorization":   "Bearer s",
					"X-Chime-Fire-Id": "forged", // validation rejects these; never sent anyway
					"x-chime-extra":   "forged",
					"Host":            "evil.example",
				},
			},
			wantBody: `{"a":1}`,
			wantHeader: map[string]string{
				"Content-Type":       "application/json",
				"User-Agent":         "chime-test",
				"Content-Length":     "7",
				"X-Chime-Task-Id":    "task-1",
				"X-Chime-Fire-Id":    "task-1:7",
				"X-Chime-Due-At":     "2025-03-04T04:06:07.123456789Z",
				"X-Chime-Attempt":    "2",
				"X-Chime-Slot-Epoch": "5",
				"X-Custom":           "v1",
				"Authorization":      "Bearer s",
				"X-Chime-Extra":      "",
			},
		},
		{
			name:     "no payload, no epoch",
			job:      Job{TaskID: "01J", Seq: 1, Due: 0, Attempt: 1},
			wantBody: "",
			wantHeader: map[string]string{
				"Content-Type":       "application/json",
				"Content-Length":     "0",
				"X-Chime-Task-Id":    "01J",
				"X-Chime-Fire-Id":    "01J:1",
				"X-Chime-Due-At":     "1970-01-01T00:00:00Z",
				"X-Chime-Attempt":    "1",
				"X-Chime-Slot-Epoch": "",
			},
		},
		{
			name: "framing headers dropped",
			job: Job{
				TaskID: "f", Seq: 2, Due: 0, Attempt: 1, Payload: []byte(`{"b":2}`),
				Headers: map[string]string{ // rejected by validation; never sent
					"Transfer-Encoding": "chunked",
					"content-length":    "99",
					"Trailer":           "X-T",
					"CONNECTION":        "close",
				},
			},
			wantBody: `{"b":2}`,
			wantHeader: map[string]string{
				"Content-Length":    "7",
				"Transfer-Encoding": "",
				"Trailer":           "",
				"Connection":        "",
				"X-Chime-Fire-Id":   "f:2",
			},
		},
		{
			name:     "user content type and agent",
			job:      Job{TaskID: "t", Seq: 18446744073709551615, Due: -1, Attempt: 101, Headers: map[string]string{"content-type": "application/cloudevents+json", "user-agent": "receiver-test/1"}},
			wantBody: "",
			wantHeader: map[string]string{
				"Content-Type":    "application/cloudevents+json",
				"User-Agent":      "receiver-test/1",
				"X-Chime-Fire-Id": "t:18446744073709551615",
				"X-Chime-Due-At":  "1969-12-31T23:59:59.999999999Z",
				"X-Chime-Attempt": "101",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dispNoLeaks(t)
			type seen struct {
				method, path, host string
				header             http.Header
				body               []byte
			}
			got := make(chan seen, 1)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				h := r.Header.Clone()
				if r.ContentLength >= 0 {
					h.Set("Content-Length", strconv.FormatInt(r.ContentLength, 10))
				}
				got <- seen{r.Method, r.URL.RequestURI(), r.Host, h, body}
			}))
			t.Cleanup(srv.Close)

			d, results := newDispTest(t, Config{Concurrency: 1, UserAgent: "chime-test"}, Deps{})
			d.Start()
			j := tt.job
			j.URL = srv.URL + "/hook?x=1"
			j.Timeout = 10 * time.Second
			if !d.Submit(&j) {
				t.Fatal("submit = false, want true")
			}
			r := <-results
			s := <-got
			if r.Outcome != OutcomeSuccess || r.Job != &j {
				t.Fatalf("result = %v %d %q (job %p), want success (job %p)", r.Outcome, r.StatusCode, r.Err, r.Job, &j)
			}
			if s.method != http.MethodPost || s.path != "/hook?x=1" || s.host != strings.TrimPrefix(srv.URL, "http://") {
				t.Errorf("request line = %s %s Host %s, want POST /hook?x=1 Host %s", s.method, s.path, s.host, srv.URL)
			}
			if string(s.body) != tt.wantBody {
				t.Errorf("body = %q, want %q", s.body, tt.wantBody)
			}
			for k, want := range tt.wantHeader {
				if v, ok := s.header[k]; want == "" && ok {
					t.Errorf("header %s = %q, want absent", k, v)
				} else if want != "" && (len(v) != 1 || v[0] != want) {
					t.Errorf("header %s = %q, want [%q]", k, v, want)
				}
			}
		})
	}
}

func TestDispatchOutcome(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hang" {
			<-r.Context().Done()
			return
		}
		code, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/status/"))
		if code >= 300 && code < 400 {
			w.Header().Set("Location", "/status/200")
		}
		w.WriteHeader(code)
		_, _ = io.WriteString(w, "reply")
	}))
	t.Cleanup(srv.Close)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + ln.Addr().String() + "/"
	ln.Close()

	tests := []struct {
		name     string
		url      string
		timeout  time.Duration
		want     Outcome
		wantCode int
		wantErr  string // substring; "" = Err must be empty
		wantBody string
	}{
		{name: "200", url: srv.URL + "/status/200", want: OutcomeSuccess, wantCode: 200, wantBody: "reply"},
		{name: "204", url: srv.URL + "/status/204", want: OutcomeSuccess, wantCode: 204},
		{name: "299", url: srv.URL + "/status/299", want: OutcomeSuccess, wantCode: 299, wantBody: "reply"},
		{name: "301 not followed", url: srv.URL + "/status/301", want: OutcomeFailure, wantCode: 301, wantBody: "reply"},
		{name: "400", url: srv.URL + "/status/400", want: OutcomeFailure, wantCode: 400, wantBody: "reply"},
		{name: "404", url: srv.URL + "/status/404", want: OutcomeGone, wantCode: 404, wantBody: "reply"},
		{name: "410", url: srv.URL + "/status/410", want: OutcomeGone, wantCode: 410, wantBody: "reply"},
		{name: "429", url: srv.URL + "/status/429", want: OutcomeFailure, wantCode: 429, wantBody: "reply"},
		{name: "500", url: srv.URL + "/status/500", want: OutcomeFailure, wantCode: 500, wantBody: "reply"},
		{name: "timeout", url: srv.URL + "/hang", timeout: 50 * time.Millisecond, want: OutcomeFailure, wantErr: "timeout after 50ms"},
		{name: "connection refused", url: refused, want: OutcomeFailure, wantErr: "refused"},
		{name: "bad url", url: "http://[::1", want: OutcomeFailure, wantErr: "missing ']'"},
		{name: "bad scheme", url: "ftp://127.0.0.1/x", want: OutcomeFailure, wantErr: "unsupported protocol scheme"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dispNoLeaks(t)
			c := &stampClock{Clock: clock.Real}
			j := dispJob("t", tt.url)
			if tt.timeout != 0 {
				j.Timeout = tt.timeout
			}
			r := dispFireOne(t, c, j)
			if r.Outcome != tt.want || r.StatusCode != tt.wantCode {
				t.Errorf("outcome, status = %v, %d, want %v, %d (err %q)", r.Outcome, r.StatusCode, tt.want, tt.wantCode, r.Err)
			}
			if (tt.wantErr == "") != (r.Err == "") || !strings.Contains(r.Err, tt.wantErr) {
				t.Errorf("Err = %q, want containing %q", r.Err, tt.wantErr)
			}
			if string(r.Body) != tt.wantBody {
				t.Errorf("Body = %q, want %q", r.Body, tt.wantBody)
			}
			if !c.gave(r.StartedAt) || !c.gave(r.FinishedAt) || r.FinishedAt.Before(r.StartedAt) {
				t.Errorf("StartedAt, FinishedAt = %v, %v, want times of the injected clock, in order", r.StartedAt, r.FinishedAt)
			}
		})
	}
}

// stampClock is a clock that remembers the times it gave.
type stampClock struct {
	clock.Clock
	mu    sync.Mutex
	given []time.Time
}

func (c *stampClock) Now() time.Time {
	now := c.Clock.Now()
	c.mu.Lock()
	c.given = append(c.given, now)
	c.mu.Unlock()
	return now
}

// gave reports whether c's Now returned t.
func (c *stampClock) gave(t time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.ContainsFunc(c.given, t.Equal)
}

func TestDispatchRetryAfter(t *testing.T) {
	now := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	serverDate := now.Add(-time.Hour) // the receiver's clock is an hour behind ours
	tests := []struct {
		name       string
		status     int
		retryAfter string
		date       string // "" = no Date header
		// arrival, when set, makes Retry-After the HTTP date of the
		// server's time plus arrival (the dispatcher's clock is the real
		// one): whole seconds, so the delay found may be up to 1s short.
		arrival time.Duration
		want    time.Duration
	}{
		{name: "seconds", status: 503, retryAfter: "120", want: 120 * time.Second},
		{name: "zero seconds", status: 429, retryAfter: "0", want: 0},
		{name: "huge seconds clamped", status: 429, retryAfter: "99999999999999999999999", want: maxRetryAfter},
		{name: "negative", status: 503, retryAfter: "-5", want: 0},
		{name: "garbage", status: 503, retryAfter: "soon", want: 0},
		{name: "date vs Date header", status: 503, retryAfter: serverDate.Add(30 * time.Second).Format(http.TimeFormat), date: serverDate.Format(http.TimeFormat), want: 30 * time.Second},
		{name: "date vs arrival time", status: 503, arrival: 45 * time.Second, want: 45 * time.Second},
		{name: "date in the past", status: 503, arrival: -time.Minute, want: 0},
		{name: "on 404", status: 404, retryAfter: "7", want: 7 * time.Second},
		{name: "ignored on 2xx", status: 200, retryAfter: "7", want: 0},
		{name: "absent", status: 500, want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dispNoLeaks(t)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tt.retryAfter != "" {
					w.Header().Set("Retry-After", tt.retryAfter)
				}
				if tt.arrival != 0 {
					w.Header().Set("Retry-After", time.Now().Add(tt.arrival).UTC().Format(http.TimeFormat))
				}
				if tt.date != "" {
					w.Header().Set("Date", tt.date)
				} else {
					w.Header()["Date"] = nil // suppress the server's own
				}
				w.WriteHeader(tt.status)
			}))
			t.Cleanup(srv.Close)
			r := dispFireOne(t, nil, dispJob("t", srv.URL))
			short := tt.want - r.RetryAfter
			if r.StatusCode != tt.status || tt.arrival == 0 && short != 0 || short < 0 || short >= time.Second {
				t.Errorf("status, RetryAfter = %d, %v, want %d, %v", r.StatusCode, r.RetryAfter, tt.status, tt.want)
			}
		})
	}
}

func TestDispatchResultBody(t *testing.T) {
	big := bytes.Repeat([]byte("0123456789abcdef"), 1000) // 16000 bytes
	tests := []struct {
		name  string
		reply []byte
		want  []byte
	}{
		{name: "empty", reply: nil, want: nil},
		{name: "short", reply: []byte("ok"), want: []byte("ok")},
		{name: "exactly 512", reply: big[:512], want: big[:512]},
		{name: "513", reply: big[:513], want: big[:512]},
		{name: "16000", reply: big, want: big[:512]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dispNoLeaks(t)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = w.Write(tt.reply)
			}))
			t.Cleanup(srv.Close)
			r := dispFireOne(t, nil, dispJob("t", srv.URL))
			if !bytes.Equal(r.Body, tt.want) || (tt.want == nil) != (r.Body == nil) {
				t.Errorf("Body = %d bytes %.20q…, want %d bytes %.20q…", len(r.Body), r.Body, len(tt.want), tt.want)
			}
		})
	}
}

// TestDispatchResultBodyOwned checks that a result's Body survives the
// worker's next attempt (the 512-byte buffer is reused).
func TestDispatchResultBodyOwned(t *testing.T) {
	dispNoLeaks(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, strings.Repeat(r.Header.Get("X-Chime-Task-Id"), 600))
	}))
	t.Cleanup(srv.Close)
	d, results := newDispTest(t, Config{Concurrency: 1}, Deps{})
	for _, id := range []string{"a", "b", "c"} {
		d.Submit(dispJob(id, srv.URL))
	}
	d.Start()
	for _, r := range dispRecv(t, results, 3) {
		if want := strings.Repeat(r.Job.TaskID, 512); string(r.Body) != want {
			t.Errorf("Body of %s = %.10q… (%d bytes), want %d × %q", r.Job.TaskID, r.Body, len(r.Body), 512, r.Job.TaskID)
		}
	}
}
