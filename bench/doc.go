// Package bench is Chime's benchmark harness: a library of workloads that
// drive a real node over its HTTP API (docs/API.md) and measure it
// against ceilings taken in the same run. `chime bench <workload>` exposes
// it; docs/BENCHMARKS.md explains each workload and how to run it.
//
// Each workload is a Config (with a Default…Config constructor and a
// Validate method) plus a function Run…(ctx, cfg) (Result, error):
//
//   - RunCreate: N tasks due in an hour, single or batched creates;
//     tasks/s, request latency, node CPU per task; ceiling baseline-pebble.
//   - RunFire: N one-shot tasks due over N/Rate seconds, fired into the
//     built-in Receiver; fire rate, lateness percentiles, earliest fire,
//     completion, duplicates, node CPU per fire, RSS; ceiling baseline-http.
//   - RunScale: N tasks stored; node RSS, data dir size, create time and,
//     for a spawned node, stop and restart-to-ready time.
//   - RunFailover: a fire run through a spawned cluster during which one
//     node is SIGKILLed; time until every survivor's slot table drops it,
//     whether and when its tasks fire again, missed and duplicate fires,
//     and the survivors' lateness before, during and after.
//   - RunJoin: a fire run during which one more node starts and joins;
//     time until it is in every table, tasks stranded in the slots it took,
//     lateness of the others before, during and after.
//   - RunIdle: a spawned cluster with no tasks, settled, then left alone
//     for a window; each node's CPU share of one core and RSS from /proc,
//     its goroutines from /metrics (issue 17's idle targets).
//   - RunHTTPBaseline, RunPebbleBaseline: the ceilings on their own
//     (MeasureHTTP and MeasurePebble are the building blocks workloads use).
//
// The nodes under test are either running (TargetConfig.URLs: one node or
// members of one cluster) or spawned (TargetConfig.Spawn, Nodes): `chime
// serve` on free 127.0.0.1 ports with temporary data directories, stopped
// with SIGTERM at the end, their CPU time and memory read from /proc/<pid>
// and reported per node and summed. More than one spawned node form a
// cluster with the layout of scripts/cluster.sh (node I is nI on base
// ports + I-1, joining all the others), started through that script when
// TargetConfig.ClusterScript names it, else by the same command lines from
// Go (the launcher interface). Work is spread over all nodes; create
// --route owner|foreign sends each task to its slot's owner or away from it
// (GET /v1/cluster + slots.Of) to measure forwarding.
//
// Ceilings are measured in the same run because absolute numbers on a
// shared 2-core machine swing by 2-5× with the neighbours' load
// (research/limits.md); the ratio Chime/ceiling is what stays comparable.
// baseline-http is a bare net/http client (keep-alive, 64 in flight)
// posting callback-shaped ~100-byte bodies to the same Receiver: the most
// callbacks/s the box can carry, and the Receiver's own capacity, so a run
// can tell when the receiver rather than the node was the limit.
// baseline-pebble writes the same task records through storage.Batch with
// Commit(true): the most durable creates/s the disk and CPU allow.
//
// What it is not: not a load generator for remote clusters at scale (one
// process, one machine), not a correctness test suite (it reports early
// and duplicate fires but asserts nothing), and not the micro-benchmarks,
// which live next to the code they measure as *_test.go Benchmark
// functions.
//
// Invariants:
//   - Nothing binds anything but loopback: the Receiver refuses other
//     addresses, a spawned node gets --http-addr 127.0.0.1:<free port>.
//   - The harness signals only processes it started (or the pid files of
//     the cluster script it ran, after checking /proc that the pid is that
//     node's chime serve), by pid.
//   - What the cluster gets wrong is reported, not hidden: tasks of a
//     killed node that are missed, and tasks stranded in a joiner's slots,
//     are counted (with replication and handover both should be 0).
//   - Lateness is measured against the due time the harness scheduled, not
//     only the X-Chime-Due-At header, so a node reporting a wrong due time
//     shows up in DueMismatch instead of hiding lateness.
//   - A request arriving before its due time is always counted as early,
//     whatever its attempt or duplicate status.
//   - No package-level mutable state: any number of workloads may run in
//     one process (each has its own Receiver, clients and target).
//
// Concurrency: Receiver and Histogram are the only types meant to be shared.
// Receiver's methods are safe for concurrent use (one mutex guards its
// recording; handlers hold it for a few map and histogram updates and never
// across I/O). Histogram is not safe for concurrent use; owners serialize
// access. Run… functions block until the workload is done or ctx ends;
// they start goroutines (clients, the receiver's server, a waiter per
// spawned process) and wait for all of them before returning.
//
// Usage:
//
//	cfg := bench.DefaultFireConfig()
//	cfg.Target = bench.TargetConfig{Spawn: true}
//	cfg.N, cfg.Rate = 100_000, 5_000
//	res, err := bench.RunFire(ctx, cfg)
//	if err != nil { … }
//	paths, err := bench.Save("bench/out", &res) // JSON, markdown, SVG
//	res.WriteMarkdown(os.Stdout)
package bench
