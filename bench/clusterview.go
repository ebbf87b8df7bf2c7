package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/chime-scheduler/chime/slots"
)

// clusterView is the part of GET /v1/cluster the harness reads: one node's
// picture of the members and the slot table.
type clusterView struct {
	Self         string          `json:"self"`
	TableVersion uint64          `json:"table_version"`
	Settled      bool            `json:"settled"`
	Members      []clusterMember `json:"members"`
}

// clusterMember is one member of GET /v1/cluster.
type clusterMember struct {
	Name        string      `json:"name"`
	HTTPAddr    string      `json:"http_addr"`
	State       string      `json:"state"`  // joining, active, draining, left, dead
	Status      string      `json:"status"` // alive, suspect, dead, left
	SlotsOwned  int         `json:"slots_owned"`
	OwnedRanges [][2]uint16 `json:"owned_ranges"`
}

// fetchCluster asks api for its view of the cluster, the members' slot
// ranges included (owners needs them).
func fetchCluster(ctx context.Context, api *apiClient) (clusterView, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	var v clusterView
	a, err := api.do(ctx, http.MethodGet, "/v1/cluster?ranges=true", nil)
	if err != nil {
		return v, err
	}
	if a.status != http.StatusOK {
		return v, fmt.Errorf("bench: GET %s/v1/cluster: %s", api.base, answerText(a))
	}
	if err := json.Unmarshal(a.body, &v); err != nil {
		return v, fmt.Errorf("bench: GET %s/v1/cluster: %w", api.base, err)
	}
	return v, nil
}

// owned returns how many slots member name owns in v (0 when absent).
func (v clusterView) owned(name string) int {
	for _, m := range v.Members {
		if m.Name == name {
			return m.SlotsOwned
		}
	}
	return 0
}

// ownerMap maps every slot to the index (0-based) of its owner in the
// target's nodes; -1 when no node owns it.
type ownerMap []int8

// owners builds the slot → node map of v's table. Nodes are matched by
// name; every member owning slots must be one of the nodes.
func (v clusterView) owners(nodes []*member) (ownerMap, error) {
	om := make(ownerMap, slots.Count)
	for s := range om {
		om[s] = -1
	}
	for _, cm := range v.Members {
		if cm.SlotsOwned == 0 {
			continue
		}
		k := slices.IndexFunc(nodes, func(m *member) bool { return m.name == cm.Name })
		if k < 0 {
			return nil, fmt.Errorf("bench: member %s (%s) owns %d slots but is not among the target's nodes; list every member's URL", cm.Name, cm.HTTPAddr, cm.SlotsOwned)
		}
		for _, r := range cm.OwnedRanges {
			for s := int(r[0]); s <= int(r[1]) && s < slots.Count; s++ {
				om[s] = int8(k)
			}
		}
	}
	return om, nil
}

// of returns the index of the node owning task id, -1 when none does.
func (om ownerMap) of(id string) int { return int(om[slots.Of(id)]) }

// agreed reports whether views (one per node) show want members, all active
// and alive, the same table and a settled membership.
func agreed(views []clusterView, want int) bool {
	for _, v := range views {
		if len(v.Members) != want || !v.Settled || v.TableVersion != views[0].TableVersion {
			return false
		}
		for _, m := range v.Members {
			if m.State != "active" || m.Status != "alive" {
				return false
			}
		}
	}
	return len(views) > 0
}

// waitAgreed waits until every node's /v1/cluster shows want members, all
// active and alive, one table and a settled membership; it names URL
// targets after the members they are. It returns the first node's view.
func waitAgreed(ctx context.Context, nodes []*member, want int, timeout time.Duration) (clusterView, error) {
	deadline := time.Now().Add(timeout)
	var last []string
	for {
		views := make([]clusterView, 0, len(nodes))
		last = last[:0]
		for _, m := range nodes {
			v, err := fetchCluster(ctx, m.api)
			if err != nil {
				last = append(last, err.Error())
				break
			}
			if m.name == "" {
				m.name = v.Self
			}
			views = append(views, v)
			last = append(last, fmt.Sprintf("%s: %d members, table %016x, settled %v", v.Self, len(v.Members), v.TableVersion, v.Settled))
		}
		if len(views) == len(nodes) && agreed(views, want) {
			return views[0], nil
		}
		if time.Now().After(deadline) {
			return clusterView{}, fmt.Errorf("bench: the %d nodes did not agree on one table of %d members within %s: %s",
				len(nodes), want, timeout, strings.Join(last, "; "))
		}
		if err := sleepCtx(ctx, 50*time.Millisecond); err != nil {
			return clusterView{}, err
		}
	}
}

// tableWatch polls GET /v1/cluster on some nodes, each on its own
// goroutine every interval, until a condition holds on every one of them,
// and records when it first held on each (the arrival of the first answer
// showing it: an upper bound, at most an interval and a round trip late).
type tableWatch struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	at     []time.Time // per node; zero = not yet
	polls  int
}

// watchTables starts polling nodes until cond holds on each or ctx ends.
func watchTables(ctx context.Context, nodes []*member, every time.Duration, cond func(clusterView) bool) *tableWatch {
	ctx, cancel := context.WithCancel(ctx)
	w := &tableWatch{cancel: cancel, at: make([]time.Time, len(nodes))}
	for k, m := range nodes {
		w.wg.Go(func() {
			tick := time.NewTicker(every)
			defer tick.Stop()
			for {
				v, err := fetchCluster(ctx, m.api)
				got := time.Now()
				w.mu.Lock()
				w.polls++
				w.mu.Unlock()
				if err == nil && cond(v) {
					w.mu.Lock()
					w.at[k] = got
					w.mu.Unlock()
					return
				}
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
			}
		})
	}
	return w
}

// stop ends the polling and returns when the condition first held on each
// node (zero: never while watched) and how many polls were made.
func (w *tableWatch) stop() ([]time.Time, int) {
	w.cancel()
	w.wg.Wait()
	return slices.Clone(w.at), w.polls
}

// changeWait bounds how long a run waits, after its fires, for a change to
// reach every node's table: memberlist declares a node dead after a few
// seconds on loopback, which may outlast a short run's fires.
const changeWait = 30 * time.Second

// wait waits until the condition held on every node, for at most d or
// until ctx ends, then returns like stop.
func (w *tableWatch) wait(ctx context.Context, d time.Duration) ([]time.Time, int) {
	done := make(chan struct{})
	go func() {
		w.wg.Wait()
		close(done)
	}()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-done:
	case <-ctx.Done():
	case <-timer.C:
	}
	return w.stop()
}
