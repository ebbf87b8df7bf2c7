package node

import (
	"cmp"
	"context"
	"net/http"
	"strings"

	"github.com/chime-scheduler/chime/node/dashboard"
	"github.com/chime-scheduler/chime/node/dispatch"
	"github.com/chime-scheduler/chime/node/httpapi"
	"github.com/chime-scheduler/chime/ring"
	"github.com/chime-scheduler/chime/ring/gossip"
)

// The wiring of the live dashboard's snapshot (package node/dashboard):
// the node's parts behind the Source it reads, and the endpoint other
// members fetch this node's row from.

// newDashboard builds the node's dashboard. It reads the store and the
// metrics only when a snapshot is taken, so it may be built in New, before
// Start opens them: events noted from then on are on the timeline.
func newDashboard(n *Node) *dashboard.Dashboard {
	return dashboard.New(dashboard.Config{
		Name: n.cfg.Name, HTTPAddr: n.cfg.HTTPAddr, Now: n.now, Hosts: n.hosts, Circuits: n.circuits,
		Insecure: n.cfg.Cluster != nil && n.cfg.Cluster.Insecure,
	}, dashSource{n})
}

// Dashboard is the node's live dashboard: its snapshots (GET /v1/snapshot,
// and the ui package's websocket stream) and timeline.
func (n *Node) Dashboard() *dashboard.Dashboard { return n.dash }

// dashSource is the node as its dashboard sees it (dashboard.Source).
type dashSource struct{ n *Node }

var _ dashboard.Source = dashSource{}

func (s dashSource) Stats() (dashboard.Stats, error) {
	st, err := api(s).Stats()
	if err != nil {
		return dashboard.Stats{}, err
	}
	out := dashboard.Stats{Metrics: st.Metrics, UptimeSeconds: st.UptimeSeconds, Ready: st.Ready,
		TasksOverdue: st.TasksOverdue, SlotsStalled: st.SlotsStalled, TasksStored: -1}
	if c, ok := s.n.taskCount(); ok {
		out.TasksStored = c
	}
	return out, nil
}

func (s dashSource) LatenessBuckets() ([]uint64, []float64) { return s.n.metrics.LatenessBuckets() }

// ScanDue scans the slots this node owns in the current view: the replicas
// it follows are their owner's to count, so that a cluster's heatmaps add
// up.
func (s dashSource) ScanDue(from, to int64, fn func(wake int64) bool) error {
	return s.n.store.ScanDue(s.n.view.Load().Owns, from, to, func(_ uint16, _ string, wake int64) bool { return fn(wake) })
}

func (s dashSource) View() *dashboard.View {
	if s.n.cfg.Cluster == nil {
		return nil
	}
	return s.n.view.Load().dash
}

func (s dashSource) SlotHealth() (under, importing, stalled []uint16) {
	if s.n.ctl != nil {
		under, importing = s.n.ctl.Flagged()
	}
	return under, importing, s.n.health.Stalled().Slots
}

func (s dashSource) FetchMember(ctx context.Context, name, httpAddr string) (int, []byte, error) {
	c, err := s.n.fwd.Do(ctx, ring.Member{Name: name, HTTPAddr: httpAddr},
		http.MethodGet, "/internal/v1/member", nil, http.Header{}, 0)
	if err != nil {
		return 0, nil, err
	}
	return c.Status, c.Body, nil
}

// serveMember serves this node's own dashboard row, for the node that
// serves the dashboard. Only other nodes may call it.
func (s dashSource) serveMember(w http.ResponseWriter, r *http.Request) {
	if _, _, e := s.n.guard.Read(r, "member", 0); e != nil {
		writeError(w, e)
		return
	}
	a, err := s.n.dash.Member(r.Context())
	if err != nil {
		writeError(w, asError(err))
		return
	}
	writeJSON(w, http.StatusOK, a)
}

// dashView is v as the dashboard shows it, built once per view so that the
// dashboard builds the slot table's bytes once per view too.
func dashView(members []gossip.Member, table ring.Table) *dashboard.View {
	out := &dashboard.View{Members: make([]dashboard.Member, len(members)), Table: table}
	for i, m := range members {
		out.Members[i] = dashboard.Member{Name: m.Name, GossipAddr: m.Addr, HTTPAddr: m.Meta.HTTPAddr,
			State: m.Meta.State.String(), Status: m.Status.String(), Up: m.Up()}
	}
	return out
}

// callbackHost is the scheme://host:port part of a callback URL, the key of
// the per-host latency view, with any user:password masked
// (https://***@host): the view is on the dashboard and in the snapshot.
func callbackHost(u string) string {
	return httpapi.RedactURL(callbackAuthority(u))
}

// callbackEndpoint is callbackHost with the path: the key of the per-URL
// latency view (no query or fragment, which often carry tokens and make
// every call a URL of its own).
func callbackEndpoint(u string) string { return callbackHost(u) + callbackPath(u) }

// callbackPath is u's path, "/" when it has none, without query or
// fragment: callbackEndpoint is callbackHost and this.
func callbackPath(u string) string {
	path := u[len(callbackAuthority(u)):]
	if i := strings.IndexAny(path, "?#"); i >= 0 {
		path = path[:i]
	}
	return cmp.Or(path, "/")
}

// callbackAuthority is the scheme://[userinfo@]host:port part of u.
func callbackAuthority(u string) string {
	rest := u
	if i := strings.Index(rest, "://"); i >= 0 {
		rest = rest[i+3:]
	}
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		return u[:len(u)-len(rest)+i]
	}
	return u
}

// circuits returns the node's callback circuits that are not closed, for
// the dashboard; nil when the breaker is off.
func (n *Node) circuits() []dispatch.CircuitInfo {
	if n.breakers == nil {
		return nil
	}
	return n.breakers.Circuits()
}
