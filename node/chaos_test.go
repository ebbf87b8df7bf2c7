package node

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// TestRandomOpsKeepTheGuarantees runs a seeded random mix of creates,
// replaces, deletes, pauses, resumes and triggers against a node that is
// firing at the same time (with a receiver that sometimes fails), and then
// checks the promises of the API from the receiver's point of view:
//   - no callback arrives before its X-Chime-Due-At;
//   - a one-shot task that was never deleted, paused or replaced fires
//     exactly once with fire id <id>:1;
//   - nothing fires for a task after its DELETE was acknowledged;
//   - one fire id never completes twice (a 2xx is recorded once).
func TestRandomOpsKeepTheGuarantees(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		seed := rand.Uint64() // not the clock: a bubble's starts at the same instant every run
		t.Logf("seed %d", seed)
		rnd := rand.New(rand.NewPCG(seed, 7))
		tn := startNode(t, nil)
		rcv := newReceiver(t)
		rcv.setRespond(func(h hit, n int) int {
			// Fail about one attempt in five (retried after 1 s), never 404.
			if (len(h.FireID)+n)%5 == 0 {
				return http.StatusInternalServerError
			}
			return http.StatusOK
		})

		const tasks = 300
		type state struct {
			deletedAt time.Time // zero while alive
			touched   bool      // paused, replaced or triggered: fire count not fixed
			periodic  bool
		}
		var mu sync.Mutex
		states := make(map[string]*state, tasks)
		for i := range tasks {
			id := fmt.Sprintf("r%03d", i)
			body := map[string]any{"id": id, "callback_url": rcv.url("/r"), "max_retries": 5}
			st := &state{}
			if rnd.IntN(4) == 0 {
				body["every_ms"] = 300 + rnd.IntN(400)
				st.periodic = true
			} else {
				body["delay_ms"] = rnd.IntN(2500)
			}
			if code := tn.do(t, "POST", "/v1/tasks", body, nil); code != 201 {
				t.Fatalf("create %s: %d", id, code)
			}
			states[id] = st
		}
		// Random operations while the tasks fire.
		var wg sync.WaitGroup
		for w := range 4 {
			wrnd := rand.New(rand.NewPCG(seed, uint64(w)+100))
			wg.Go(func() {
				for range 60 {
					id := fmt.Sprintf("r%03d", wrnd.IntN(tasks))
					mu.Lock()
					st := states[id]
					dead := !st.deletedAt.IsZero()
					mu.Unlock()
					if dead {
						continue
					}
					switch op := wrnd.IntN(5); op {
					case 0:
						if code := tn.do(t, "DELETE", "/v1/tasks/"+id, nil, nil); code == 204 {
							mu.Lock()
							st.deletedAt = time.Now()
							mu.Unlock()
						}
					case 1:
						mu.Lock()
						st.touched = true
						mu.Unlock()
						tn.do(t, "POST", "/v1/tasks/"+id+"/pause", nil, nil)
						time.Sleep(time.Duration(wrnd.IntN(200)) * time.Millisecond)
						tn.do(t, "POST", "/v1/tasks/"+id+"/resume", nil, nil)
					case 2:
						mu.Lock()
						st.touched = true
						mu.Unlock()
						tn.do(t, "POST", "/v1/tasks/"+id+"/trigger", nil, nil)
					case 3:
						mu.Lock()
						st.touched = true
						st.periodic = false
						mu.Unlock()
						tn.do(t, "PUT", "/v1/tasks/"+id, map[string]any{"callback_url": rcv.url("/r"), "delay_ms": wrnd.IntN(1000), "max_retries": 5}, nil)
					default:
						tn.do(t, "GET", "/v1/tasks/"+id, nil, nil)
					}
					time.Sleep(time.Duration(wrnd.IntN(30)) * time.Millisecond)
				}
			})
		}
		wg.Wait()
		// Let every pending fire and retry finish, then stop the periodic ones.
		time.Sleep(5 * time.Second)
		mu.Lock()
		for id, st := range states {
			if st.periodic && st.deletedAt.IsZero() {
				if code := tn.do(t, "DELETE", "/v1/tasks/"+id, nil, nil); code == 204 {
					st.deletedAt = time.Now()
				}
			}
		}
		mu.Unlock()
		time.Sleep(1500 * time.Millisecond)

		hits := rcv.hits()
		succeeded := make(map[string]int)
		perTask := make(map[string]map[string]bool)
		for _, h := range hits {
			if h.At.Before(h.Due) {
				t.Errorf("%s arrived %v before its due time", h.FireID, h.Due.Sub(h.At))
			}
			st := states[h.TaskID]
			if st == nil {
				t.Errorf("callback for unknown task %q", h.TaskID)
				continue
			}
			// A fire whose due time is after the DELETE was acknowledged must
			// never be sent. (One already started may still arrive: the
			// dispatcher does not recall queued attempts.)
			if !st.deletedAt.IsZero() && h.Due.After(st.deletedAt) && h.Header.Get("X-Chime-Attempt") == "1" {
				t.Errorf("%s (due %v) fired although its task was deleted at %v", h.FireID, h.Due, st.deletedAt)
			}
			if perTask[h.TaskID] == nil {
				perTask[h.TaskID] = make(map[string]bool)
			}
			perTask[h.TaskID][h.FireID] = true
		}
		// Which attempts were answered 2xx: recompute with the same rule.
		answers := make(map[string]int)
		for _, h := range hits {
			answers[h.TaskID]++
			if (len(h.FireID)+answers[h.TaskID])%5 != 0 {
				succeeded[h.FireID]++
			}
		}
		for fid, n := range succeeded {
			if n > 1 {
				t.Errorf("fire %s succeeded %d times, want once", fid, n)
			}
		}
		for id, st := range states {
			if st.touched || st.periodic || !st.deletedAt.IsZero() {
				continue
			}
			fids := perTask[id]
			if len(fids) != 1 || !fids[id+":1"] {
				t.Errorf("untouched one-shot %s fired as %v, want exactly %s:1", id, fids, id)
			}
		}
	})
}
