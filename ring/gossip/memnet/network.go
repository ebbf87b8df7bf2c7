package memnet

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync"

	"github.com/hashicorp/memberlist"
)

// DefaultQueueDepth is the packet queue of each transport. memberlist reads
// its packet channel in a tight loop, so the queue only needs to absorb a
// burst (a gossip round to every peer plus probe acks); 1024 does that for
// any cluster size the tests use while still letting a stalled reader
// overflow (drop) instead of growing without bound.
const DefaultQueueDepth = 1024

// Errors returned by Transport methods.
var (
	// ErrClosed is returned by WriteTo and DialTimeout on a transport that
	// was shut down.
	ErrClosed = errors.New("memnet: transport closed")
	// ErrRefused is returned by DialTimeout when the destination is unknown,
	// shut down or crashed.
	ErrRefused = errors.New("memnet: connection refused")
	// ErrTimeout is returned by DialTimeout when the timeout passes first:
	// a partition separates the ends or the destination did not accept. It
	// is a net.Error whose Timeout method reports true.
	ErrTimeout error = timeoutError{}
)

type timeoutError struct{}

func (timeoutError) Error() string   { return "memnet: dial timeout" }
func (timeoutError) Timeout() bool   { return true }
func (timeoutError) Temporary() bool { return true }

var _ net.Error = timeoutError{}

// Stats counts what the network did with packets and dials since New.
type Stats struct {
	// Delivered counts packets placed in a destination queue.
	Delivered uint64
	// DropUnknown counts packets to an address nobody holds.
	DropUnknown uint64
	// DropDown counts packets from or to a transport that is shut down or
	// crashed.
	DropDown uint64
	// DropPartition counts packets cut by a partition.
	DropPartition uint64
	// DropFull counts packets dropped because the destination queue was full.
	DropFull uint64
	// DropLoss counts packets dropped by the random loss rate.
	DropLoss uint64
	// Dials counts streams handed to a destination.
	Dials uint64
	// DialFailures counts dials that returned an error.
	DialFailures uint64
}

// Network is a set of in-memory transports that can reach each other. The
// zero value is not usable; call New.
type Network struct {
	mu struct {
		sync.Mutex
		// transports holds the current transport of each address, including
		// one that is down until the address is handed out again.
		transports map[string]*Transport
		// group is each address's partition group while partitioned;
		// addresses not listed are in group 0.
		group       map[string]int
		partitioned bool
		loss        float64
		rng         *rand.Rand
		queueDepth  int
		conns       map[*conn]struct{}
		stats       Stats
	}
}

// New returns an empty network whose random packet loss (off until SetLoss)
// is drawn from a generator seeded with seed, so a failing test can be
// rerun with the same seed. Goroutine scheduling still decides which
// packet meets which draw.
func New(seed uint64) *Network {
	n := &Network{}
	n.mu.transports = make(map[string]*Transport)
	n.mu.group = make(map[string]int)
	n.mu.rng = rand.New(rand.NewPCG(seed, 0x6d656d6e6574)) // "memnet"
	n.mu.queueDepth = DefaultQueueDepth
	n.mu.conns = make(map[*conn]struct{})
	return n
}

// Transport returns a new transport listening on addr, which must be an
// IP:port such as "127.0.0.1:7001". The address is never bound; it only
// names the transport inside this network. Handing out an address whose
// transport is still up is a programmer error and panics; once the previous
// holder is shut down or crashed, the address is reused (a restart).
func (n *Network) Transport(addr string) *Transport {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		panic(fmt.Sprintf("memnet: Transport(%q): address must be IP:port: %v", addr, err))
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if old := n.mu.transports[addr]; old != nil && !old.isDown() {
		panic(fmt.Sprintf("memnet: Transport(%q): address in use", addr))
	}
	t := &Transport{
		net:      n,
		addr:     addr,
		ip:       net.IP(ap.Addr().AsSlice()),
		port:     int(ap.Port()),
		udp:      net.UDPAddrFromAddrPort(ap),
		tcp:      net.TCPAddrFromAddrPort(ap),
		packetCh: make(chan *memberlist.Packet, n.mu.queueDepth),
		streamCh: make(chan net.Conn),
		down:     make(chan struct{}),
	}
	n.mu.transports[addr] = t
	return t
}

// SetLoss sets the probability in [0, 1] that a packet which would
// otherwise be delivered is dropped. Streams are never lossy (TCP
// retransmits). Values outside [0, 1] are clamped.
func (n *Network) SetLoss(p float64) {
	p = min(max(p, 0), 1)
	n.mu.Lock()
	n.mu.loss = p
	n.mu.Unlock()
}

// SetQueueDepth sets the packet queue size of transports created after the
// call (minimum 1).
func (n *Network) SetQueueDepth(depth int) {
	n.mu.Lock()
	n.mu.queueDepth = max(depth, 1)
	n.mu.Unlock()
}

// Partition splits the network: each group is a set of addresses that can
// reach each other and nothing else; addresses in no group form one more
// group together. It replaces any earlier partition and closes the
// established streams that cross a cut. Partition() with no groups is Heal.
func (n *Network) Partition(groups ...[]string) {
	n.mu.Lock()
	clear(n.mu.group)
	n.mu.partitioned = len(groups) > 0
	for i, g := range groups {
		for _, a := range g {
			n.mu.group[a] = i + 1
		}
	}
	cut := n.connsLocked(func(c *conn) bool { return !n.reachableLocked(c.local.addr, c.remote.addr) })
	n.mu.Unlock()
	closeAll(cut)
}

// Heal removes the partition; every transport that is up can reach every
// other again. Crashed transports stay crashed.
func (n *Network) Heal() {
	n.mu.Lock()
	clear(n.mu.group)
	n.mu.partitioned = false
	n.mu.Unlock()
}

// Crash kills the transport at addr the way SIGKILL kills a process: from
// now on nothing is delivered to or from it, dials to it are refused and
// its open streams are closed. Its memberlist keeps running until the
// caller shuts it down, but it is unreachable. Crash of an unknown address
// is a no-op.
func (n *Network) Crash(addr string) {
	n.mu.Lock()
	t := n.mu.transports[addr]
	if t == nil {
		n.mu.Unlock()
		return
	}
	t.crashed.Store(true)
	cut := n.connsLocked(func(c *conn) bool { return c.local == t || c.remote == t })
	n.mu.Unlock()
	t.markDown()
	closeAll(cut)
}

// Stats returns the packet and dial counters.
func (n *Network) Stats() Stats {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.mu.stats
}

// reachableLocked reports whether a and b are on the same side of the
// partition.
func (n *Network) reachableLocked(a, b string) bool {
	return !n.mu.partitioned || n.mu.group[a] == n.mu.group[b]
}

// routePacket decides the fate of one packet from src to addr: the
// destination transport, or nil if the packet is dropped (and counted).
func (n *Network) routePacket(src *Transport, addr string) *Transport {
	n.mu.Lock()
	defer n.mu.Unlock()
	dst := n.mu.transports[addr]
	switch {
	case src.isDown() || n.mu.transports[src.addr] != src:
		n.mu.stats.DropDown++
	case dst == nil:
		n.mu.stats.DropUnknown++
	case dst.isDown():
		n.mu.stats.DropDown++
	case !n.reachableLocked(src.addr, addr):
		n.mu.stats.DropPartition++
	case n.mu.loss > 0 && n.mu.rng.Float64() < n.mu.loss:
		n.mu.stats.DropLoss++
	default:
		return dst
	}
	return nil
}

// routeStream decides the fate of a dial from src to addr: the destination
// and whether a partition black-holes it, or ErrRefused.
func (n *Network) routeStream(src *Transport, addr string) (dst *Transport, reachable bool, err error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	dst = n.mu.transports[addr]
	if src.isDown() || dst == nil || dst.isDown() {
		n.mu.stats.DialFailures++
		return nil, false, ErrRefused
	}
	return dst, n.reachableLocked(src.addr, addr), nil
}

// count applies f to the counters under the lock.
func (n *Network) count(f func(s *Stats)) {
	n.mu.Lock()
	f(&n.mu.stats)
	n.mu.Unlock()
}

// connsLocked returns the open streams for which cut reports true.
func (n *Network) connsLocked(cut func(c *conn) bool) []*conn {
	var out []*conn
	for c := range n.mu.conns {
		if cut(c) {
			out = append(out, c)
		}
	}
	return out
}

func closeAll(cs []*conn) {
	for _, c := range cs {
		_ = c.Close()
	}
}
