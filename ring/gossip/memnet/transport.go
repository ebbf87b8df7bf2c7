package memnet

import (
	"bytes"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
)

// Transport is one member's end of a Network. It implements
// memberlist.NodeAwareTransport; hand it to memberlist through
// memberlist.Config.Transport (or gossip.Config.Transport).
type Transport struct {
	net      *Network
	addr     string
	ip       net.IP
	port     int
	udp      *net.UDPAddr
	tcp      *net.TCPAddr
	packetCh chan *memberlist.Packet
	streamCh chan net.Conn

	// down is closed once, by Shutdown or Crash; a down transport neither
	// sends nor receives.
	down     chan struct{}
	downOnce sync.Once
	closed   atomic.Bool // Shutdown was called
	crashed  atomic.Bool // Network.Crash was called
}

var _ memberlist.NodeAwareTransport = (*Transport)(nil)

// Addr returns the address the transport was created with.
func (t *Transport) Addr() string { return t.addr }

// FinalAdvertiseAddr implements memberlist.Transport. It always returns the
// transport's own address, whatever memberlist was configured with.
func (t *Transport) FinalAdvertiseAddr(string, int) (net.IP, int, error) {
	return t.ip, t.port, nil
}

// WriteTo implements memberlist.Transport. It copies b and never blocks;
// see the package doc for when the packet is dropped. A dropped packet is
// not an error, as with UDP; only a shut-down sender gets ErrClosed.
func (t *Transport) WriteTo(b []byte, addr string) (time.Time, error) {
	now := time.Now()
	if t.closed.Load() {
		return now, ErrClosed
	}
	dst := t.net.routePacket(t, addr)
	if dst == nil {
		return now, nil
	}
	p := &memberlist.Packet{Buf: bytes.Clone(b), From: t.udp, Timestamp: now}
	select {
	case dst.packetCh <- p:
		t.net.count(func(s *Stats) { s.Delivered++ })
	default:
		t.net.count(func(s *Stats) { s.DropFull++ })
	}
	return now, nil
}

// WriteToAddress implements memberlist.NodeAwareTransport; the node name
// is ignored.
func (t *Transport) WriteToAddress(b []byte, a memberlist.Address) (time.Time, error) {
	return t.WriteTo(b, a.Addr)
}

// PacketCh implements memberlist.Transport. The channel is never closed.
func (t *Transport) PacketCh() <-chan *memberlist.Packet { return t.packetCh }

// DialTimeout implements memberlist.Transport: it hands one end of a
// net.Pipe to the destination and returns the other. It returns ErrClosed
// if t is shut down, ErrRefused if the destination is unknown or down, and
// ErrTimeout if the timeout passes first (partitioned, or not accepted in
// time). A timeout <= 0 means no timeout.
func (t *Transport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	if t.closed.Load() {
		t.net.count(func(s *Stats) { s.DialFailures++ })
		return nil, ErrClosed
	}
	dst, reachable, err := t.net.routeStream(t, addr)
	if err != nil {
		return nil, err
	}
	var expired <-chan time.Time
	if timeout > 0 {
		timer := time.NewTimer(timeout)
		defer timer.Stop()
		expired = timer.C
	}
	if !reachable {
		// A partition black-holes the SYN: nothing answers until the timer.
		select {
		case <-expired:
			err = ErrTimeout
		case <-t.down:
			err = ErrClosed
		}
		t.net.count(func(s *Stats) { s.DialFailures++ })
		return nil, err
	}
	client, server := t.net.pipe(t, dst)
	select {
	case dst.streamCh <- server:
		t.net.count(func(s *Stats) { s.Dials++ })
		return client, nil
	case <-dst.down:
		err = ErrRefused
	case <-t.down:
		err = ErrClosed
	case <-expired:
		err = ErrTimeout
	}
	_ = client.Close()
	_ = server.Close()
	t.net.count(func(s *Stats) { s.DialFailures++ })
	return nil, err
}

// DialAddressTimeout implements memberlist.NodeAwareTransport; the node
// name is ignored.
func (t *Transport) DialAddressTimeout(a memberlist.Address, timeout time.Duration) (net.Conn, error) {
	return t.DialTimeout(a.Addr, timeout)
}

// StreamCh implements memberlist.Transport. The channel is never closed.
func (t *Transport) StreamCh() <-chan net.Conn { return t.streamCh }

// Shutdown implements memberlist.Transport. It closes the done channel
// exactly once and closes the transport's open streams; it never fails.
func (t *Transport) Shutdown() error {
	t.closed.Store(true)
	t.markDown()
	t.net.mu.Lock()
	cut := t.net.connsLocked(func(c *conn) bool { return c.local == t || c.remote == t })
	t.net.mu.Unlock()
	closeAll(cut)
	return nil
}

// markDown closes the down channel once.
func (t *Transport) markDown() {
	t.downOnce.Do(func() { close(t.down) })
}

// isDown reports whether the transport was shut down or crashed.
func (t *Transport) isDown() bool {
	select {
	case <-t.down:
		return true
	default:
		return false
	}
}
