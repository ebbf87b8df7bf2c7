package bench

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// Routes of creates in a cluster: which node each request goes to.
const (
	// RouteAny sends request k to node k mod N, whoever owns its tasks.
	RouteAny = "any"
	// RouteOwner sends each task to the node that owns its slot, from the
	// table of GET /v1/cluster and slots.Of: no request is forwarded.
	RouteOwner = "owner"
	// RouteForeign sends each task to a node that does not own it (the
	// others in turn): every request is forwarded once.
	RouteForeign = "foreign"
	// RouteCompare runs owner, then foreign with fresh ids, in one run,
	// so the cost of forwarding is measured under the same conditions.
	RouteCompare = "compare"
	// RouteSDK creates through the Go SDK (package client) seeded with
	// every node, owner routing on: each create goes to its slot's owner
	// from the SDK's slot map (GET /v1/cluster/slots).
	RouteSDK = "sdk"
	// RouteSDKFixed creates through the Go SDK with owner routing off and
	// the first node as its only seed: that node forwards every create it
	// does not own, (N-1)/N of them on N nodes (a client behind a load
	// balancer that sticks to one node).
	RouteSDKFixed = "sdk-fixed"
	// RouteSDKCompare runs sdk, then sdk-fixed with fresh ids, in one run.
	RouteSDKCompare = "sdk-compare"
)

// routeNames lists the routes for messages and flag help.
const routeNames = "any, owner, foreign, compare, sdk, sdk-fixed or sdk-compare"

// validRoute reports whether r is one of the routes.
func validRoute(r string) bool {
	switch r {
	case RouteAny, RouteOwner, RouteForeign, RouteCompare, RouteSDK, RouteSDKFixed, RouteSDKCompare:
		return true
	}
	return false
}

// phasesOf returns the routes of the phases route runs: the two of a
// comparison, or route itself.
func phasesOf(route string) []string {
	switch route {
	case RouteCompare:
		return []string{RouteOwner, RouteForeign}
	case RouteSDKCompare:
		return []string{RouteSDK, RouteSDKFixed}
	}
	return []string{route}
}

// viaSDK reports whether the phase route creates through the Go SDK.
func viaSDK(route string) bool { return route == RouteSDK || route == RouteSDKFixed }

// idTag tells the ids of a comparison's phases apart: bc-<run>-<tag>-<i>.
func idTag(route string) string {
	switch route {
	case RouteOwner:
		return "o"
	case RouteForeign:
		return "f"
	case RouteSDK:
		return "s"
	case RouteSDKFixed:
		return "sf"
	}
	return route
}

// routeVia returns the createPlan.via of route over nodes: id gives task
// i's id and om the slot owners (owner and foreign only). It returns nil
// (everything to the first node) for any on a single node.
func routeVia(route string, nodes []*member, om ownerMap, id func(i int) string) (func(req, first int) *apiClient, error) {
	n := len(nodes)
	switch route {
	case RouteAny:
		if n < 2 {
			return nil, nil
		}
		return func(req, _ int) *apiClient { return nodes[req%n].api }, nil
	case RouteOwner, RouteForeign:
		if n < 2 || om == nil {
			return nil, fmt.Errorf("bench: route %s needs a cluster of at least 2 nodes", route)
		}
	default:
		return nil, fmt.Errorf("bench: route %q is not %s, %s or %s (the sdk routes do not pick nodes)", route, RouteAny, RouteOwner, RouteForeign)
	}
	return func(req, first int) *apiClient {
		o := om.of(id(first))
		if o < 0 { // no owner: let any node answer (503)
			return nodes[req%n].api
		}
		if route == RouteOwner {
			return nodes[o].api
		}
		return nodes[(o+1+req%(n-1))%n].api
	}, nil
}

// metricForwarded is the node's counter of requests forwarded to a slot's
// owner (labelled by result).
const metricForwarded = "chime_forwarded_requests_total"

// forwardedTotal sums chime_forwarded_requests_total (every result) over
// nodes' /metrics. ok is false when a node did not answer /metrics. A node
// that has forwarded nothing yet has no series of the counter: 0.
func forwardedTotal(ctx context.Context, nodes []*member) (total int64, ok bool) {
	for _, m := range nodes {
		n, found := metricSum(ctx, m.api, metricForwarded)
		if !found {
			return 0, false
		}
		total += n
	}
	return total, true
}

// metricSum returns the sum of every series of the counter name in api's
// /metrics (Prometheus text format), 0 when it has none; ok is false when
// /metrics did not answer 200.
func metricSum(ctx context.Context, api *apiClient, name string) (sum int64, ok bool) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	a, err := api.do(ctx, http.MethodGet, "/metrics", nil)
	if err != nil || a.status != http.StatusOK {
		return 0, false
	}
	for line := range bytes.SplitSeq(a.body, []byte("\n")) {
		rest, cut := bytes.CutPrefix(line, []byte(name))
		if !cut || len(rest) == 0 || (rest[0] != '{' && rest[0] != ' ') {
			continue
		}
		i := bytes.LastIndexByte(rest, ' ')
		v, err := strconv.ParseFloat(string(rest[i+1:]), 64)
		if err != nil {
			continue
		}
		sum += int64(v)
	}
	return sum, true
}
