// Package memnet is a lossy in-memory network for memberlist: a Network
// hands out Transports (memberlist.Transport implementations) that deliver
// packets and streams to each other through channels, never through
// sockets. It exists so that multi-node membership tests run in one
// process, inside a testing/synctest bubble with fake time, and can cut,
// heal and kill links at will.
//
//	n := memnet.New(1)                            // seed for the loss rate
//	cfg := gossip.DefaultLocalConfig()
//	cfg.Transport = n.Transport("127.0.0.1:7001") // looks like an address, never bound
//	...
//	n.Partition([]string{"127.0.0.1:7001"})       // isolate node 1
//	n.Heal()
//	n.Crash("127.0.0.1:7002")                     // like SIGKILL: stops delivering at once
//
// What it is not: a network simulator. There is no latency, no reordering
// beyond what goroutine scheduling gives, and no bandwidth limit; packets
// are delivered at once or dropped. It is not memberlist's MockNetwork,
// whose sends block forever on a peer that stopped reading: here every
// send is non-blocking or bounded by a timer. It is test support, but it
// lives in a normal package so that other packages' tests (node/nodetest)
// can use it too.
//
// # Delivery rules
//
// WriteTo copies the buffer and does a non-blocking send into the
// destination's packet queue (QueueDepth packets, default
// DefaultQueueDepth). The packet is dropped, and WriteTo still reports
// success as UDP would, when the destination is unknown, shut down or
// crashed; when the sender itself has crashed; when a partition separates
// sender and destination; when the queue is full; or by the loss rate
// (SetLoss), drawn from the Network's seeded generator.
//
// DialTimeout creates a net.Pipe and hands one end to the destination's
// stream channel. It fails at once with ErrRefused when the destination is
// unknown, shut down or crashed (a dead process answers a SYN with RST), and
// with ErrTimeout after the timeout when a partition separates the two (a
// black-holed SYN) or the destination does not accept in time. Partition
// and Crash close the established streams they cut; Shutdown closes the
// streams of the transport that shut down.
//
// Shutdown closes the transport's done channel exactly once; later calls
// are no-ops. Crash is the same from the network's point of view, except
// that the crashed transport's own memberlist is not told: its sends vanish
// until the caller shuts it down. After a crash or shutdown the address may
// be handed out again (a restart).
//
// # Invariants
//
//   - No method blocks on a peer: every wait is a select over a channel and
//     a timer or the transport's done channel, so a test inside a synctest
//     bubble never deadlocks on the network, and fake time advances past
//     dial timeouts.
//   - No real I/O and no goroutines: memnet starts nothing.
//   - Packet and stream channels are never closed, so a late send can never
//     panic; a transport that is down simply stops being read.
//
// # Concurrency
//
// All methods of Network and Transport are safe for concurrent use. The
// partition table, the transport registry, the open streams, the loss
// generator and the counters live in the Network under one mutex; it is
// never held across a channel send or a Close.
package memnet
