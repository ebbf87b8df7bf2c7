package dispatch

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// dispSinkEnv makes the test binary, run with -test.run of
// TestDispatchSinkProcess, serve as the benchmarks' callback receiver.
const dispSinkEnv = "CHIME_DISPATCH_SINK"

// TestDispatchSinkProcess is not a test: it is the callback receiver of
// BenchmarkDispatch, run in a child process (the test binary itself) so
// that the benchmark's process CPU is the client's alone. It skips unless
// dispSinkEnv is set. It serves net/http on 127.0.0.1, prints its address,
// and exits when its stdin closes.
func TestDispatchSinkProcess(t *testing.T) {
	if os.Getenv(dispSinkEnv) != "1" {
		t.Skip("only run by BenchmarkDispatch as its receiver process")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, `{"ok":true}`)
	})}
	go func() { _ = srv.Serve(ln) }()
	fmt.Println(ln.Addr().String())
	_, _ = io.Copy(io.Discard, os.Stdin)
	_ = srv.Close()
}

// dispSink is a receiver process started by startDispSink.
type dispSink struct {
	url   string
	cmd   *exec.Cmd
	stdin io.WriteCloser
}

// startDispSink starts the receiver process and waits for its address.
func startDispSink(b *testing.B) *dispSink {
	b.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestDispatchSinkProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), dispSinkEnv+"=1", "GOMAXPROCS=2")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		stdin.Close()
		_ = cmd.Wait()
		b.Fatalf("sink process: %v", err)
	}
	go func() { _, _ = io.Copy(io.Discard, stdout) }() // the child's test output
	return &dispSink{url: "http://" + strings.TrimSpace(line) + "/hook", cmd: cmd, stdin: stdin}
}

// stop ends the receiver and returns the CPU time it used.
func (s *dispSink) stop() time.Duration {
	s.stdin.Close()
	if err := s.cmd.Wait(); err != nil {
		return 0
	}
	return s.cmd.ProcessState.UserTime() + s.cmd.ProcessState.SystemTime()
}

// dispProcessCPU returns the CPU time (user + system) this process has used.
func dispProcessCPU(b *testing.B) time.Duration {
	b.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkDispatch measures callbacks to a net/http receiver in a child
// process on 127.0.0.1 (limits.md's loopback setup), with `inflight`
// callbacks in flight; one op is one callback, with a ~100 B payload and
// the callback headers. Besides ns/op it reports callbacks/s, cpu-us/op
// (this process's CPU per callback: the client side alone, measured with
// getrusage around the loop) and sink-cpu-us/op (the receiver's).
//
//   - impl=fasthttp is the dispatcher: its scheduler, fasthttp encoding and
//     parsing, its connection pool.
//   - impl=nethttp is the baseline: `inflight` goroutines looping over a
//     net/http Client tuned like the dispatcher's former transport, building
//     the same request and reading the same 512 B of response.
func BenchmarkDispatch(b *testing.B) {
	payload := []byte(`{"order":12345,"action":"expire","note":"a payload of about one hundred bytes"}`)
	const inflight = 64
	due := time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC).UnixNano()

	report := func(b *testing.B, cpu0 time.Duration, sink *dispSink) {
		cpu := dispProcessCPU(b) - cpu0
		n := float64(b.N)
		b.ReportMetric(n/b.Elapsed().Seconds(), "callbacks/s")
		b.ReportMetric(float64(cpu.Microseconds())/n, "cpu-us/op")
		b.ReportMetric(float64(sink.stop().Microseconds())/n, "sink-cpu-us/op")
	}

	b.Run(fmt.Sprintf("impl=fasthttp/inflight=%d", inflight), func(b *testing.B) {
		sink := startDispSink(b)
		free := make(chan *Job, inflight) // jobs not in flight; also the in-flight bound
		for i := range inflight {
			free <- &Job{
				TaskID: "task-" + strconv.Itoa(i), Due: due, Attempt: 1, URL: sink.url,
				Payload: payload, Timeout: 10 * time.Second,
				Headers: map[string]string{"Authorization": "Bearer token"},
			}
		}
		var failed atomic.Pointer[Result]
		d := New(Config{Concurrency: inflight, PerHost: inflight}, Deps{OnResult: func(r Result) {
			if r.Outcome != OutcomeSuccess {
				failed.CompareAndSwap(nil, &r)
			}
			free <- r.Job
		}})
		d.Start()
		defer d.Close(context.Background())
		var seq uint64
		b.ReportAllocs()
		cpu0 := dispProcessCPU(b)
		for b.Loop() {
			j := <-free
			seq++
			j.Seq = seq
			if !d.Submit(j) {
				b.Fatal("submit refused")
			}
		}
		for range inflight {
			<-free
		}
		report(b, cpu0, sink)
		if r := failed.Load(); r != nil {
			b.Fatalf("callback failed: %d %q", r.StatusCode, r.Err)
		}
	})

	b.Run(fmt.Sprintf("impl=nethttp/inflight=%d", inflight), func(b *testing.B) {
		sink := startDispSink(b)
		tr := &http.Transport{
			DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConns:        inflight,
			MaxIdleConnsPerHost: inflight,
			MaxConnsPerHost:     inflight,
			IdleConnTimeout:     90 * time.Second,
			DisableCompression:  true,
		}
		client := &http.Client{
			Transport:     tr,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
		defer tr.CloseIdleConnections()
		next := make(chan uint64)
		var failed atomic.Pointer[string]
		var wg sync.WaitGroup
		for w := range inflight {
			wg.Go(func() {
				var body [bodyKeep]byte
				taskID := "task-" + strconv.Itoa(w)
				for seq := range next {
					if err := dispNetHTTPCallback(client, sink.url, taskID, seq, due, payload, body[:]); err != nil {
						msg := err.Error()
						failed.CompareAndSwap(nil, &msg)
					}
				}
			})
		}
		var seq uint64
		b.ReportAllocs()
		cpu0 := dispProcessCPU(b)
		for b.Loop() {
			seq++
			next <- seq
		}
		close(next)
		wg.Wait()
		report(b, cpu0, sink)
		if msg := failed.Load(); msg != nil {
			b.Fatalf("callback failed: %s", *msg)
		}
	})
}

// dispNetHTTPCallback is one callback the way the dispatcher sent it with
// net/http: the same headers, the first 512 B of the response kept.
func dispNetHTTPCallback(client *http.Client, url, taskID string, seq uint64, due int64, payload, body []byte) error {
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, url, bytes.NewReader(payload))
	if err != nil {
		return err
	}
	req.Header = http.Header{
		"Content-Type":    {"application/json"},
		"User-Agent":      {"chime"},
		"Authorization":   {"Bearer token"},
		"X-Chime-Task-Id": {taskID},
		"X-Chime-Fire-Id": {taskID + ":" + strconv.FormatUint(seq, 10)},
		"X-Chime-Due-At":  {time.Unix(0, due).UTC().Format(time.RFC3339Nano)},
		"X-Chime-Attempt": {"1"},
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	n, _ := io.ReadFull(resp.Body, body)
	_ = bytes.Clone(body[:n])
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, drainLimit))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return nil
}
