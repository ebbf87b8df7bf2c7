package node

import (
	"net/http"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// TestPipeServerCloseWhileHandling: close waits for a handler that is
// running when it is called, without a race between the handler's start
// and close's wait (the race detector flags an unordered first Add).
func TestPipeServerCloseWhileHandling(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pn := newPipeNet()
		addr := "127.0.0.1:7001"
		var started, returned atomic.Bool
		s := servePipe(pn.listen(addr), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			started.Store(true)
			defer returned.Store(true)
			<-r.Context().Done() // until its connection closes
		}))
		client := &http.Client{Transport: &http.Transport{DialContext: pn.dialer("127.0.0.1:40000")}}
		defer client.CloseIdleConnections()
		go func() {
			if resp, err := client.Get("http://" + addr + "/"); err == nil {
				resp.Body.Close()
			}
		}()
		time.Sleep(time.Second) // the handler runs, blocked
		s.close()               // nothing before orders the handler's start before it
		if !started.Load() {
			t.Fatal("the handler did not start")
		}
		if !returned.Load() {
			t.Error("close returned before the running handler")
		}
	})
}
