package node

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"
)

// BenchmarkDispatch measures callbacks/s to a local httptest server (which
// shares the CPU with the client, as in limits.md's loopback numbers). One
// op is n callbacks submitted and all reported. impl=stdlib is the
// baseline: `concurrency` goroutines looping over http.Client.Do with the
// same transport settings and no scheduler.
func BenchmarkDispatch(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, `{"ok":true}`)
	}))
	defer srv.Close()
	payload := []byte(`{"order":12345,"action":"expire","note":"a payload of about one hundred bytes"}`)
	const n, conc = 1000, 64

	{
		b.Run(fmt.Sprintf("impl=dispatcher/concurrency=%d/n=%d", conc, n), func(b *testing.B) {
			var wg sync.WaitGroup
			d := newDispatcher(DispatchConfig{Concurrency: conc, PerHost: conc}, nil, func(r fireResult) {
				if r.Outcome != outcomeSuccess {
					panic("callback failed: " + r.Err)
				}
				wg.Done()
			})
			d.start()
			defer d.close(context.Background())
			jobs := make([]fireJob, n)
			for i := range jobs {
				jobs[i] = fireJob{
					TaskID: "task-" + strconv.Itoa(i), Seq: 1, Due: time.Now().UnixNano(), Attempt: 1,
					URL: srv.URL + "/hook", Payload: payload, Timeout: 10 * time.Second,
					Headers: map[string]string{"Authorization": "Bearer token"},
				}
			}
			b.ReportAllocs()
			for b.Loop() {
				wg.Add(n)
				for i := range jobs {
					if !d.submit(&jobs[i]) {
						b.Fatal("submit refused")
					}
				}
				wg.Wait()
			}
			b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "callbacks/s")
		})

		b.Run(fmt.Sprintf("impl=stdlib/concurrency=%d/n=%d", conc, n), func(b *testing.B) {
			client := newDispatcher(DispatchConfig{Concurrency: conc, PerHost: conc}, nil, func(fireResult) {}).client
			defer client.CloseIdleConnections()
			b.ReportAllocs()
			for b.Loop() {
				var wg sync.WaitGroup
				next := make(chan int, n)
				for i := range n {
					next <- i
				}
				close(next)
				for range conc {
					wg.Go(func() {
						for range next {
							req, _ := http.NewRequest(http.MethodPost, srv.URL+"/hook", bytes.NewReader(payload))
							req.Header.Set("Content-Type", "application/json")
							resp, err := client.Do(req)
							if err != nil {
								panic(err)
							}
							_, _ = io.Copy(io.Discard, resp.Body)
							resp.Body.Close()
						}
					})
				}
				wg.Wait()
			}
			b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "callbacks/s")
		})
	}
}
