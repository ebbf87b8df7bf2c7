package dispatch

// Jobs, results and their classification: what a Job asks, how
// Dispatcher.attempt runs it and turns the response (or its absence) into a
// Result, Retry-After included.

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
)

// Job is one attempt of one fire: what Submit takes and Result.Job gives
// back. The dispatcher reads it while the attempt runs; the caller must not
// modify it until the Result arrives (or Close returns it).
type Job struct {
	TaskID  string            // -> X-Chime-Task-Id
	Slot    uint16            // the task's slot; not sent, for the caller's bookkeeping
	Seq     uint64            // fire sequence; X-Chime-Fire-Id = TaskID + ":" + Seq
	Due     int64             // logical due (Unix ns) -> X-Chime-Due-At, RFC 3339 with nanoseconds, UTC
	Attempt int               // 1 = first attempt -> X-Chime-Attempt
	Epoch   uint64            // slot epoch; when non-zero send X-Chime-Slot-Epoch
	URL     string            // callback URL (absolute http or https)
	Payload []byte            // body (raw JSON); empty = no body
	Headers map[string]string // user's extra headers
	Timeout time.Duration     // this attempt's timeout; <= 0 means defaultTimeout
	Notice  bool              // a result callback (the node's bookkeeping); not sent
	Ack     bool              // an attempt of the fire's ACK phase (URL is the ack_url) -> X-Chime-Ack: 1
	// Started, when set, is stored the attempt's start (Unix ns of
	// Deps.Clock) just before its request is built and sent: the flow
	// limiter's rate window counts an attempt from when it leaves.
	Started *atomic.Int64
	// Submitted, when set, is when the caller handed the job over (Unix
	// ns of Deps.Clock); the caller's metrics read it back from the
	// Result. Not sent.
	Submitted int64
}

// Outcome classifies one attempt. The zero value is invalid on purpose.
type Outcome uint8

// Attempt outcomes (API.md "Callback", "Response").
const (
	OutcomeSuccess Outcome = 1 + iota // 2xx
	OutcomeGone                       // 404 or 410: the endpoint is gone, no retry
	OutcomeFailure                    // anything else, a timeout, a connection error, shutdown
	OutcomeDenied                     // the callback address policy refused the address: never dialed, no retry
)

// String returns a short lower-case name of the outcome.
func (o Outcome) String() string {
	switch o {
	case OutcomeSuccess:
		return "success"
	case OutcomeGone:
		return "gone"
	case OutcomeFailure:
		return "failure"
	case OutcomeDenied:
		return "denied"
	}
	return "unknown"
}

// Result is what one attempt produced, handed to Deps.OnResult.
type Result struct {
	Job        *Job // the job submitted
	Outcome    Outcome
	StatusCode int           // 0 when no response
	Err        string        // transport error, timeout or "shutdown" text; "" when a response arrived
	Body       []byte        // first 512 bytes of the response body; owned by the receiver of the result
	RetryAfter time.Duration // parsed Retry-After of a non-2xx response, 0 if none
	StartedAt  time.Time     // Deps.Clock's time when the attempt started
	FinishedAt time.Time     // Deps.Clock's time when it ended
}

// attempt performs one POST and classifies it. It never returns early
// without FinishedAt. In the steady state (a kept-alive connection, a
// short response) it allocates only the result's copy of the body.
func (d *Dispatcher) attempt(j *Job, s *scratch) Result {
	res := Result{Job: j, Outcome: OutcomeFailure, StartedAt: d.clock.Now()}
	if j.Started != nil {
		j.Started.Store(res.StartedAt.UnixNano())
	}
	timeout := j.Timeout
	if timeout <= 0 {
		timeout = defaultTimeout
	}
	deadline := d.clock.Now().Add(timeout)
	if msg := checkURL(j.URL); msg != "" {
		res.Err = msg
		res.FinishedAt = d.clock.Now()
		return res
	}

	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseResponse(resp)
	defer fasthttp.ReleaseRequest(req)
	d.buildRequest(req, j, s)
	s.key = poolKey(s.key[:0], req.URI())

	c, err := d.roundTrip(req, resp, s, deadline)
	if err != nil {
		var denied *deniedError
		switch {
		case d.stop.Err() != nil:
			res.Err = Shutdown
		case errors.As(err, &denied):
			res.Outcome = OutcomeDenied
			res.Err = denied.Error()
		case !d.clock.Now().Before(deadline):
			res.Err = "timeout after " + timeout.String()
		default:
			res.Err = errText(err)
		}
		res.FinishedAt = d.clock.Now()
		return res
	}
	at := d.clock.Now()
	res.StatusCode = resp.StatusCode()
	switch {
	case res.StatusCode >= 200 && res.StatusCode <= 299:
		res.Outcome = OutcomeSuccess
	case res.StatusCode == http.StatusNotFound || res.StatusCode == http.StatusGone:
		res.Outcome = OutcomeGone
	default: // 101, 3xx (redirects are not followed), 4xx, 5xx
		res.Outcome = OutcomeFailure
	}
	if res.Outcome != OutcomeSuccess {
		if ra := resp.Header.Peek("Retry-After"); len(ra) > 0 {
			res.RetryAfter = parseRetryAfter(string(ra), string(resp.Header.Peek("Date")), at)
		}
	}
	// The outcome is decided by the status line; a body cut short (timeout,
	// shutdown, reset) only shortens Body, and costs the connection.
	stream := resp.BodyStream()
	var whole bool
	res.Body, whole = readResultBody(stream, s)
	_ = resp.CloseBodyStream()
	reusable := whole &&
		res.StatusCode >= 200 && // not 101 Switching Protocols
		resp.Header.IsHTTP11() && !resp.Header.ConnectionClose() &&
		(stream == nil || resp.Header.ContentLength() != -2) && // -2: delimited by close
		s.br.Buffered() == 0 // nothing beyond the response
	if reusable {
		d.pool.put(c)
	} else {
		d.pool.discard(c)
	}
	s.br.Reset(nil)
	s.bw.Reset(nil)
	res.FinishedAt = d.clock.Now()
	return res
}

// readResultBody returns a copy of the first bodyKeep bytes of the
// response body r (nil: none) and discards up to drainLimit more.
// whole reports that the body was read to its end, so the connection can
// serve the next request. It returns nil for an empty body.
func readResultBody(r io.Reader, s *scratch) (body []byte, whole bool) {
	if r == nil {
		return nil, true
	}
	n := 0
	var err error
	for n < len(s.body) && err == nil {
		var m int
		m, err = r.Read(s.body[n:])
		n += m
	}
	if n > 0 {
		body = bytes.Clone(s.body[:n])
	}
	for left := drainLimit; err == nil && left > 0; {
		var m int
		m, err = r.Read(s.drain[:min(left, len(s.drain))])
		left -= m
	}
	return body, err == io.EOF
}

// isTimeout reports whether err is a deadline expiring.
func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}

// errText is the Err text of a transport error: the cause without
// net/url's `parse "<url>":` prefix (the URL is in the task already) or
// fasthttp's dump of the bytes it could not parse, and plain sentences for
// a connection that ended before the response and an oversized header.
func errText(err error) string {
	if errors.Is(err, io.EOF) {
		return "connection closed before the response"
	}
	var small *fasthttp.ErrSmallBuffer
	if errors.As(err, &small) {
		return fmt.Sprintf("response header larger than %d KiB", readBuffer>>10)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	msg := err.Error()
	if i := strings.Index(msg, ": buffer size="); i >= 0 {
		msg = msg[:i]
	}
	return msg
}

// parseRetryAfter parses a Retry-After value: delta-seconds, or an
// HTTP-date taken relative to the response's Date header when it has a
// valid one (so the receiver's clock skew cancels out), else relative to at,
// the time the response arrived. It returns 0 for a missing, invalid or
// past value and clamps to maxRetryAfter.
func parseRetryAfter(v, date string, at time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if v[0] >= '0' && v[0] <= '9' {
		const maxSecs = int64(maxRetryAfter / time.Second)
		var secs int64
		for i := 0; i < len(v); i++ {
			c := v[i]
			if c < '0' || c > '9' {
				return 0
			}
			if secs <= maxSecs {
				secs = secs*10 + int64(c-'0')
			}
		}
		return time.Duration(min(secs, maxSecs)) * time.Second
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0
	}
	ref := at
	if date != "" {
		if dt, err := http.ParseTime(date); err == nil {
			ref = dt
		}
	}
	delay := t.Sub(ref)
	if delay <= 0 {
		return 0
	}
	return min(delay, maxRetryAfter)
}
