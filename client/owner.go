package client

import (
	"context"
	"errors"
)

// WithOwnerRouting turns owner routing on (the default) or off. Off, the
// client never loads the slot map and sends every request to the seeds,
// the one that answered last first, and the nodes forward each request to
// its slot's owner: the behaviour of a client behind a load balancer, and
// the baseline `chime bench create --route sdk-compare` measures routing
// against.
func WithOwnerRouting(on bool) Option { return func(c *config) { c.noRoute = !on } }

// ErrNoOwner is returned by Owner when the slot map is not known or names
// no owner for the id's slot.
var ErrNoOwner = errors.New("chime: no known owner")

// Owner returns the base URL of the node that owns task id's slot in the
// client's slot map, loading the map first if it has none, and the base
// URL of the slot's follower ("" when it has none). It is where the client
// sends a request for id.
func (c *Client) Owner(ctx context.Context, id string) (owner, follower string, err error) {
	m := c.slotMap(ctx)
	if m == nil {
		return "", "", ErrNoOwner
	}
	owner, follower = m.route(id)
	if owner == "" {
		return "", "", ErrNoOwner
	}
	return owner, follower, nil
}

// TableVersion is the version of the slot table the client's map was
// loaded from ("" before the first load). It changes after the client
// has seen a node answer with a newer table and reloaded the map.
func (c *Client) TableVersion() string {
	if m := c.slots.Load(); m != nil {
		return m.version
	}
	return ""
}
