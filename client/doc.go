// Package client is the Go SDK of Chime's HTTP API (docs/API.md): a typed
// client for the task and flow endpoints that sends each request straight
// to the node that owns the task's (or the flow key's) slot, and helpers
// for the receivers of callbacks.
//
// # Routing
//
// A Client starts from a few seed addresses. On its first request it loads
// the cluster's slot map (GET /v1/cluster/slots) from a seed, then sends a
// request for task id to the owner of slots.Of(id), the same function the
// nodes use, skipping the forwarding hop a node would otherwise take (a
// request for flow key goes to the owner of slots.Of(key), the slot of the
// key's tasks). It
// reloads the map (cheaply, with If-None-Match) when an answer's
// X-Chime-Table-Version differs from the map's version or an answer says it
// was forwarded (X-Chime-Owner). Requests without an id, and any request
// while the map is unknown, go to a seed. Any node serves any request, so a
// stale map costs a hop, never a wrong answer.
//
// # Failover and retries
//
// A connection error or a 503 moves a request to the next node (the slot's
// follower first, then the seeds), a 429 waits and retries the same node;
// both honour Retry-After, with exponential backoff in between (see
// RetryPolicy). Only idempotent requests are retried: GET, PUT, DELETE,
// pause, resume, and creates that carry an id. A create without an id, and
// a trigger, are sent once. A create with an id retried after a lost answer
// may report ErrConflict although the first attempt stored it.
//
// # Beyond tasks
//
// ListPage is one page of List, for callers that keep the cursor. Task
// and Execution marshal to (and Task unmarshals from) the API's JSON;
// ParseTask reads a task request body strictly, as a node would. Cluster,
// ForgetMember, Keys and ChangeKeys return the cluster endpoints' JSON,
// Backup streams a node's store archive, and Do sends a request to any
// endpoint with the same token, routing, retries and failover (the chime
// CLI is built on these).
//
// # Flow keys
//
// PutFlow, GetFlow and DeleteFlow manage a flow key's limits (API.md "Flow
// keys"): the tasks whose FlowKey is that key share them. GetFlow's Flow
// has the limiter's State on the owner (callbacks in flight, attempts in
// the rate window, fires waiting); Flows and FlowsPage list the cluster's
// definitions. A key the node would refuse (ValidFlowKey) is refused
// before any request, with the *Error the node would answer (400
// invalid_argument, Field "key").
//
// # Receivers
//
// ParseFire reads a callback's X-Chime-* headers and body, VerifySignature
// checks its X-Chime-Signature, and a Deduper (MemoryDeduper) drops repeated
// fires and fires from a deposed owner (a lower slot epoch).
package client
