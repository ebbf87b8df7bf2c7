// Package ui is Chime's live dashboard: a page embedded in the binary and a
// websocket that pushes the cluster snapshot to it.
//
// NewHandler serves
//
//	GET /ui/       the page: plain HTML, CSS and JavaScript from embed, no
//	               build step, no third-party code; charts on <canvas>
//	GET /v1/ws     a websocket that pushes {"type","seq","data"} every
//	               Options.Interval (1 s), data being API.Snapshot's value
//
// The page shows the cluster (node table, totals, fires/s and lateness
// charts kept client-side from the pushes, the 128×128 slot map, the event
// timeline, the wheel heatmap, callback latency per host), a tasks view
// and a failures view (the cluster's latest failed executions from GET
// /v1/executions?status=failed, each with a button that calls POST
// /v1/tasks/{id}/retry), both calling the node's REST API (API.md)
// directly with fetch. Members
// whose status is dead or left stay in the node table, greyed, and out of
// the totals; a live member whose row is stale is flagged unreachable.
//
// # What it is not
//
// ui holds no business logic and knows no node type: it sees the node only
// through the API interface it defines (one method), so it imports neither
// node, storage, pebble nor memberlist (scripts/check-deps.sh enforces it).
// It does not serve the REST API; the binary routes everything but /ui/ and
// /v1/ws to the node's own handler.
//
// # Invariants
//
//   - One snapshot per interval, whatever the number of browsers: the hub
//     takes it, encodes it once into a websocket.PreparedMessage (compressed
//     once per push when browsers negotiate permessage-deflate) and hands the
//     same message to every browser.
//   - Fan-out never blocks: a browser whose queue (Options.ClientQueue) is
//     full is dropped with close status 1013 and reconnects by itself.
//   - With Options.Token set, no websocket opens without it (query
//     access_token, subprotocol "bearer.<token>" or an Authorization
//     header), compared in constant time. The static files are public: they
//     hold no data, and the page asks the user for the token.
//
// # Concurrency
//
// A Handler is safe for concurrent use. The hub goroutine owns the set of
// browsers (register/unregister channels, no lock); it starts with the
// first websocket and its ticker runs only while someone is connected.
// Each connection has one writer goroutine (snapshots and pings, with a
// write deadline; pings every 9/10 of the pong wait) and is read by the
// HTTP handler goroutine that upgraded it (pongs, close, read limit). Close
// disconnects every browser and waits for all of these goroutines.
//
// # Usage
//
//	h := ui.NewHandler(api, ui.Options{Token: token})
//	defer h.Close()
//	mux.Handle("/ui/", h)
//	mux.Handle("/v1/ws", h)
package ui
