package node

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/chime-scheduler/chime/ring"
	"github.com/chime-scheduler/chime/ring/gossip"
	"github.com/chime-scheduler/chime/storage"
)

// memberJSON is one member in GET /v1/cluster.
type memberJSON struct {
	Name            string      `json:"name"`
	GossipAddr      string      `json:"gossip_addr,omitempty"`
	HTTPAddr        string      `json:"http_addr"`
	State           string      `json:"state"`
	Status          string      `json:"status"`
	SlotsOwned      int         `json:"slots_owned"`
	SlotsFollowing  int         `json:"slots_following"`
	OwnedRanges     [][2]uint16 `json:"owned_ranges"`
	FollowingRanges [][2]uint16 `json:"following_ranges"`
}

// clusterJSON is GET /v1/cluster.
type clusterJSON struct {
	Self string `json:"self"`
	// TableVersion identifies the slot table: its checksum, equal on every
	// node that computed the same table.
	TableVersion uint64 `json:"table_version"`
	ViewChecksum string `json:"view_checksum"`
	// Settled is false while the membership changed within the last
	// SettleTime: the table may still move.
	Settled bool `json:"settled"`
	// Insecure is set on a member started with --insecure-cluster: calls
	// between its nodes are not authenticated.
	Insecure bool         `json:"insecure"`
	Members  []memberJSON `json:"members"`
}

func rangesJSON(rs []ring.Range) [][2]uint16 {
	out := make([][2]uint16, len(rs))
	for i, r := range rs {
		out[i] = [2]uint16{r.From, r.To}
	}
	return out
}

// handleCluster describes the cluster as this node sees it: every known
// member (dead and left ones too, owning nothing) and the slot table.
func (n *Node) handleCluster(w http.ResponseWriter, _ *http.Request) {
	v := n.view.Load()
	var settle time.Duration
	if n.cluster != nil {
		settle = n.cluster.cfg.SettleTime
	}
	out := clusterJSON{Self: n.cfg.Name, TableVersion: v.table.Checksum(),
		ViewChecksum: fmt.Sprintf("%016x", v.table.Checksum()), Settled: v.settled(n.now(), settle),
		Insecure: n.cfg.Cluster != nil && n.cfg.Cluster.Insecure}
	if n.cluster == nil {
		out.TableVersion, out.ViewChecksum = singleTableVersion, fmt.Sprintf("%016x", uint64(singleTableVersion))
	}
	counts := v.table.Counts()
	for _, m := range v.members {
		owned, following := v.table.Ranges(m.Name)
		c := counts[m.Name]
		mj := memberJSON{Name: m.Name, GossipAddr: m.Addr, HTTPAddr: m.Meta.HTTPAddr,
			State: m.Meta.State.String(), Status: m.Status.String(),
			SlotsOwned: c.Owned, SlotsFollowing: c.Following,
			OwnedRanges: rangesJSON(owned), FollowingRanges: rangesJSON(following)}
		if n.cluster == nil {
			mj.Status = "alive"
		}
		out.Members = append(out.Members, mj)
	}
	writeJSON(w, http.StatusOK, out)
}

// handleInternalList is one node's part of a cluster-wide listing: its own
// slots only, from the cursor. Only other nodes may call it.
func (n *Node) handleInternalList(w http.ResponseWriter, r *http.Request) {
	if _, _, e := n.readSigned(r, "tasks", 0); e != nil {
		writeError(w, e)
		return
	}
	q, e := parseListQuery(r)
	if e != nil {
		writeError(w, e)
		return
	}
	tasks, stop, err := n.listLocal(q, n.view.Load().owns)
	if err != nil {
		writeError(w, asError(err))
		return
	}
	next := ""
	if stop != nil {
		next = encodeCursor(*stop)
	}
	writeJSON(w, http.StatusOK, listPage{tasks, next})
}

// listCluster answers GET /v1/tasks in a cluster. Every owner lists its own
// slots from the cursor in the same global order (slot, then id), in
// parallel; the page is the merge. A node that stopped early (page full or
// scan budget spent) bounds the page: nothing after its stop position is
// returned, because it may hold tasks before it. The cursor is a position
// in that global order, so it stays valid whichever node holds a slot.
func (n *Node) listCluster(w http.ResponseWriter, r *http.Request, q listQuery) {
	v := n.view.Load()
	members := v.table.Members()
	if len(members) == 0 {
		writeError(w, errNoOwner)
		return
	}
	pages := make([]listPage, len(members))
	errs := make([]error, len(members))
	var wg sync.WaitGroup
	for i, m := range members {
		if m.Name == n.cfg.Name {
			tasks, stop, err := n.listLocal(q, v.owns)
			pages[i].Tasks, errs[i] = tasks, err
			if stop != nil {
				pages[i].NextCursor = encodeCursor(*stop)
			}
			continue
		}
		wg.Go(func() {
			uri := "/internal/v1/tasks"
			if r.URL.RawQuery != "" {
				uri += "?" + r.URL.RawQuery // "?" alone would not reach the member as signed
			}
			c, err := n.fwd.do(r.Context(), m, http.MethodGet, uri, nil, r.Header, 1)
			switch {
			case err != nil:
				errs[i] = unreachable(m, err)
			case c.status != http.StatusOK:
				errs[i] = &Error{Code: CodeUnavailable, Message: fmt.Sprintf("listing on %s failed: %d %s", m.Name, c.status, c.body)}
			default:
				if err := json.Unmarshal(c.body, &pages[i]); err != nil {
					errs[i] = &Error{Code: CodeInternal, Message: fmt.Sprintf("listing on %s: %v", m.Name, err)}
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			writeError(w, asError(err))
			return
		}
	}
	page, err := mergePages(pages, q.limit)
	if err != nil {
		writeError(w, asError(err))
		return
	}
	if readOnly(r) {
		redactTasks(page.Tasks)
	}
	writeJSON(w, http.StatusOK, page)
}

// posOf is a task's position in the global listing order.
func posOf(t *TaskResponse) storage.Position {
	return storage.Position{Slot: t.Slot, ID: t.ID, Exclusive: true}
}

func comparePos(a, b storage.Position) int {
	return cmp.Or(cmp.Compare(a.Slot, b.Slot), cmp.Compare(a.ID, b.ID))
}

// mergePages merges the per-node pages of one listing into one page of at
// most limit tasks (see listCluster).
func mergePages(pages []listPage, limit int) (listPage, error) {
	var bound *storage.Position
	var all []TaskResponse
	for _, p := range pages {
		if p.NextCursor != "" {
			stop, ok := decodeCursor(p.NextCursor)
			if !ok {
				return listPage{}, fmt.Errorf("node: a member answered a malformed cursor %q", p.NextCursor)
			}
			if bound == nil || comparePos(stop, *bound) < 0 {
				bound = &stop
			}
		}
		all = append(all, p.Tasks...)
	}
	slices.SortFunc(all, func(a, b TaskResponse) int { return comparePos(posOf(&a), posOf(&b)) })
	all = slices.CompactFunc(all, func(a, b TaskResponse) bool { return a.Slot == b.Slot && a.ID == b.ID })
	if bound != nil {
		k, _ := slices.BinarySearchFunc(all, *bound, func(t TaskResponse, p storage.Position) int {
			if comparePos(posOf(&t), p) <= 0 {
				return -1
			}
			return 1
		})
		all = all[:k]
	}
	out := listPage{Tasks: all}
	switch {
	case len(all) > limit:
		out.Tasks = all[:limit]
		out.NextCursor = encodeCursor(posOf(&all[limit-1]))
	case len(all) == limit && bound != nil:
		out.NextCursor = encodeCursor(posOf(&all[limit-1]))
	case bound != nil:
		out.NextCursor = encodeCursor(*bound)
	}
	if out.Tasks == nil {
		out.Tasks = []TaskResponse{}
	}
	return out, nil
}

// handleForget serves POST /v1/cluster/members/{name}/forget: an operator
// declares a dead member gone for good (gossip.Membership.Forget). Every
// member then counts it as left: its slots' grants and its vote no longer
// count, so a cluster that lost a majority of its voters for good can go on
// (slots.Voters). Only a member this node sees dead may be forgotten.
func (n *Node) handleForget(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if n.cluster == nil {
		writeError(w, &Error{Code: CodeInvalidArgument, Field: "name", Message: "a standalone node has no members to forget"})
		return
	}
	if _, ok := n.view.Load().member(name); !ok || name == n.cfg.Name {
		writeError(w, &Error{Code: CodeNotFound, Field: "name", Message: fmt.Sprintf("no other member is named %q", name)})
		return
	}
	if err := n.cluster.mem.Forget(name); err != nil {
		if errors.Is(err, gossip.ErrNotDead) {
			writeError(w, &Error{Code: CodeConflict, Field: "name", Message: err.Error() + ": only a dead member can be forgotten"})
			return
		}
		writeError(w, &Error{Code: CodeNotFound, Field: "name", Message: err.Error()})
		return
	}
	n.log.Warn("member forgotten by an operator: it counts as left", "member", name)
	writeJSON(w, http.StatusOK, map[string]string{"forgotten": name})
}
