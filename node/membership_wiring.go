package node

import (
	"github.com/chime-scheduler/chime/node/dashboard"
	"github.com/chime-scheduler/chime/node/membership"
	"github.com/chime-scheduler/chime/node/ownership"
	"github.com/chime-scheduler/chime/ring"
	"github.com/chime-scheduler/chime/ring/gossip"
)

// The wiring of the membership (package node/membership): its config, and
// its views as the node keeps them.

// view is a membership view as the node keeps it (Node.view): with the
// members and table as the dashboard reads them, built once per view, so
// are the dashboard's slot-table bytes.
type view struct {
	*membership.View
	dash *dashboard.View
	// version identifies the table (X-Chime-Table-Version, /v1/cluster's
	// table_version): its checksum, or dashboard.SingleTableVersion on a
	// standalone node.
	version uint64
}

// nodeView is the node's view of v.
func nodeView(v *membership.View) *view {
	return &view{View: v, dash: dashView(v.Members, v.Table), version: v.Table.Checksum()}
}

// standaloneView is the view of a node without a cluster: it owns every
// slot, for good.
func standaloneView(name, httpAddr string) *view {
	v := nodeView(membership.Standalone(name, httpAddr))
	v.version = dashboard.SingleTableVersion
	return v
}

// member returns the member named name.
func (v *view) member(name string) (gossip.Member, bool) {
	return ownership.FindMember(v.Members, name)
}

// membership is the membership's config of node name, serving its API at
// httpAddr (over HTTPS when tls); fresh: the node holds no slot state.
func (c *ClusterConfig) membership(name, httpAddr string, fresh, tls bool) membership.Config {
	return membership.Config{Name: name, HTTPAddr: httpAddr, Gossip: c.Gossip, Join: c.Join, JoinRetry: c.JoinRetry,
		SettleTime: c.SettleTime, LeaveTimeout: c.LeaveTimeout, BootstrapWait: c.BootstrapWait, Fresh: fresh, TLS: tls}
}

// apiView is a view as the API sees it (httpapi.View).
type apiView struct{ v *view }

func (a apiView) Owns(s uint16) bool                    { return a.v.Owns(s) }
func (a apiView) Owner(s uint16) (ring.Member, bool)    { return a.v.Owner(s) }
func (a apiView) Follower(s uint16) (ring.Member, bool) { return a.v.Table.Follower(s) }
func (a apiView) Members() []ring.Member                { return a.v.Table.Members() }
func (a apiView) Version() uint64                       { return a.v.version }
