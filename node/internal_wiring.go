package node

import (
	"context"
	"net/http"

	"github.com/chime-scheduler/chime/node/internalauth"
	"github.com/chime-scheduler/chime/node/keyring"
	"github.com/chime-scheduler/chime/node/tlsconf"
	"github.com/chime-scheduler/chime/ring"
	"github.com/chime-scheduler/chime/ring/gossip"
)

// newGuard builds the guard of n's internal endpoints, checking calls with
// auth (the forwarder's, which signs n's own calls).
func newGuard(n *Node, auth *internalauth.Auth) *internalauth.Guard {
	cfg := internalauth.GuardConfig{Auth: auth, Self: n.cfg.Name, Now: n.now, Lease: n.lease,
		Member: func(name string) (known, left bool) {
			if n.cfg.Cluster == nil {
				// A standalone node has no membership to check (it serves
				// internal calls only in tests that give it a forwarder by
				// hand).
				return true, false
			}
			m, ok := n.view.Load().member(name)
			return ok, m.Status == gossip.StatusLeft
		},
		Rejected: func(endpoint, reason string) {
			n.metrics.InternalRejected.WithLabelValues(endpoint, reason).Inc()
		},
	}
	if n.cfg.TLS != nil && n.cfg.TLS.Mutual() {
		cfg.ClientCert = tlsconf.VerifiedPeer
	}
	return internalauth.NewGuard(cfg)
}

// guardMembers is what the guard needs of a view's members: who left.
func guardMembers(ms []gossip.Member) []internalauth.Member {
	out := make([]internalauth.Member, len(ms))
	for i, m := range ms {
		out[i] = internalauth.Member{Name: m.Name, Left: m.Status == gossip.StatusLeft}
	}
	return out
}

// newKeys builds n's gossip key endpoints.
func newKeys(n *Node) *keyring.Service {
	return keyring.New(keyring.Config{
		Self: n.cfg.Name,
		Keyring: func() keyring.Keyring {
			if n.cluster == nil {
				return nil // not a nil *gossip.Membership in an interface
			}
			return n.cluster.Gossip()
		},
		Members: func() []gossip.Member { return n.view.Load().Members },
		Call: func(ctx context.Context, m gossip.Member, body []byte) (int, []byte, error) {
			c, err := n.fwd.Do(ctx, ring.Member{Name: m.Name, HTTPAddr: m.Meta.HTTPAddr}, http.MethodPost, keyring.InternalPath, body, http.Header{}, 0)
			return c.Status, c.Body, err
		},
		// Through n.guard at call time: tests set it after New.
		Authenticate: func(r *http.Request, endpoint string, limit int64) (string, []byte, *Error) {
			return n.guard.Read(r, endpoint, limit)
		},
		Log: n.log,
	})
}
