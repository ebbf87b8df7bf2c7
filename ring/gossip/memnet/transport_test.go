package memnet_test

import (
	"errors"
	"io"
	"net"
	"testing"
	"testing/synctest"
	"time"

	"github.com/chime-scheduler/chime/ring/gossip/memnet"
)

const (
	addrA = "127.0.0.1:7001"
	addrB = "127.0.0.1:7002"
	addrC = "127.0.0.1:7003"
)

// received reports whether a packet is waiting on t and returns it.
func received(t *memnet.Transport) ([]byte, net.Addr, bool) {
	select {
	case p := <-t.PacketCh():
		return p.Buf, p.From, true
	default:
		return nil, nil, false
	}
}

func TestWriteTo(t *testing.T) {
	tests := []struct {
		name    string
		setup   func(n *memnet.Network, a, b *memnet.Transport)
		to      string
		deliver bool
		stat    func(s memnet.Stats) uint64
	}{
		{"delivered", func(*memnet.Network, *memnet.Transport, *memnet.Transport) {}, addrB, true,
			func(s memnet.Stats) uint64 { return s.Delivered }},
		{"unknown destination", func(*memnet.Network, *memnet.Transport, *memnet.Transport) {}, addrC, false,
			func(s memnet.Stats) uint64 { return s.DropUnknown }},
		{"destination shut down", func(_ *memnet.Network, _, b *memnet.Transport) { _ = b.Shutdown() }, addrB, false,
			func(s memnet.Stats) uint64 { return s.DropDown }},
		{"destination crashed", func(n *memnet.Network, _, _ *memnet.Transport) { n.Crash(addrB) }, addrB, false,
			func(s memnet.Stats) uint64 { return s.DropDown }},
		{"sender crashed", func(n *memnet.Network, _, _ *memnet.Transport) { n.Crash(addrA) }, addrB, false,
			func(s memnet.Stats) uint64 { return s.DropDown }},
		{"partitioned", func(n *memnet.Network, _, _ *memnet.Transport) { n.Partition([]string{addrA}) }, addrB, false,
			func(s memnet.Stats) uint64 { return s.DropPartition }},
		{"same side of partition", func(n *memnet.Network, _, _ *memnet.Transport) { n.Partition([]string{addrA, addrB}) }, addrB, true,
			func(s memnet.Stats) uint64 { return s.Delivered }},
		{"healed", func(n *memnet.Network, _, _ *memnet.Transport) { n.Partition([]string{addrA}); n.Heal() }, addrB, true,
			func(s memnet.Stats) uint64 { return s.Delivered }},
		{"loss rate 1", func(n *memnet.Network, _, _ *memnet.Transport) { n.SetLoss(1) }, addrB, false,
			func(s memnet.Stats) uint64 { return s.DropLoss }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := memnet.New(1)
			a, b := n.Transport(addrA), n.Transport(addrB)
			tt.setup(n, a, b)
			buf := []byte("ping")
			if _, err := a.WriteTo(buf, tt.to); err != nil {
				t.Fatalf("WriteTo(%s) = %v, want nil (drops are silent)", tt.to, err)
			}
			buf[0] = 'X' // the network must have copied the buffer
			got, from, ok := received(b)
			if ok != tt.deliver {
				t.Fatalf("delivered = %v, want %v (stats %+v)", ok, tt.deliver, n.Stats())
			}
			if ok && (string(got) != "ping" || from.String() != addrA) {
				t.Errorf("packet = %q from %v, want %q from %s", got, from, "ping", addrA)
			}
			if c := tt.stat(n.Stats()); c != 1 {
				t.Errorf("counter = %d, want 1 (stats %+v)", c, n.Stats())
			}
		})
	}
}

func TestWriteToFullQueueDrops(t *testing.T) {
	n := memnet.New(1)
	n.SetQueueDepth(2)
	a, b := n.Transport(addrA), n.Transport(addrB)
	for range 5 {
		if _, err := a.WriteTo([]byte("x"), addrB); err != nil {
			t.Fatal(err)
		}
	}
	if s := n.Stats(); s.Delivered != 2 || s.DropFull != 3 {
		t.Errorf("Stats() = %+v, want Delivered 2, DropFull 3", s)
	}
	if len(b.PacketCh()) != 2 {
		t.Errorf("queued = %d, want 2", len(b.PacketCh()))
	}
}

func TestWriteToClosedSender(t *testing.T) {
	n := memnet.New(1)
	a := n.Transport(addrA)
	n.Transport(addrB)
	if err := a.Shutdown(); err != nil {
		t.Fatal(err)
	}
	if err := a.Shutdown(); err != nil {
		t.Fatalf("second Shutdown() = %v, want nil", err)
	}
	if _, err := a.WriteTo([]byte("x"), addrB); !errors.Is(err, memnet.ErrClosed) {
		t.Errorf("WriteTo after Shutdown = %v, want ErrClosed", err)
	}
}

func TestLossIsSeeded(t *testing.T) {
	run := func(seed uint64) memnet.Stats {
		n := memnet.New(seed)
		n.SetQueueDepth(1000)
		a := n.Transport(addrA)
		n.Transport(addrB)
		n.SetLoss(0.5)
		for range 1000 {
			_, _ = a.WriteTo([]byte("x"), addrB)
		}
		return n.Stats()
	}
	s1, s2 := run(42), run(42)
	if s1 != s2 {
		t.Errorf("same seed gave %+v and %+v", s1, s2)
	}
	if s1.Delivered+s1.DropLoss != 1000 || s1.Delivered < 400 || s1.Delivered > 600 {
		t.Errorf("loss 0.5 over 1000 packets: %+v, want about 500 delivered", s1)
	}
}

func TestDialTimeout(t *testing.T) {
	const timeout = 3 * time.Second
	tests := []struct {
		name    string
		setup   func(n *memnet.Network, a, b *memnet.Transport)
		to      string
		accept  bool // run an acceptor on b
		wantErr error
		wait    time.Duration // fake time the dial takes
	}{
		{"connected", func(*memnet.Network, *memnet.Transport, *memnet.Transport) {}, addrB, true, nil, 0},
		{"unknown", func(*memnet.Network, *memnet.Transport, *memnet.Transport) {}, addrC, true, memnet.ErrRefused, 0},
		{"destination shut down", func(_ *memnet.Network, _, b *memnet.Transport) { _ = b.Shutdown() }, addrB, true, memnet.ErrRefused, 0},
		{"destination crashed", func(n *memnet.Network, _, _ *memnet.Transport) { n.Crash(addrB) }, addrB, true, memnet.ErrRefused, 0},
		{"sender shut down", func(_ *memnet.Network, a, _ *memnet.Transport) { _ = a.Shutdown() }, addrB, true, memnet.ErrClosed, 0},
		{"partitioned", func(n *memnet.Network, _, _ *memnet.Transport) { n.Partition([]string{addrB}) }, addrB, true, memnet.ErrTimeout, timeout},
		{"not accepted", func(*memnet.Network, *memnet.Transport, *memnet.Transport) {}, addrB, false, memnet.ErrTimeout, timeout},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				n := memnet.New(1)
				a, b := n.Transport(addrA), n.Transport(addrB)
				tt.setup(n, a, b)
				accepted := make(chan net.Conn, 1)
				stop := make(chan struct{})
				defer close(stop) // the acceptor must exit before the bubble ends
				if tt.accept {
					go func() {
						select {
						case c := <-b.StreamCh():
							accepted <- c
						case <-stop:
						}
					}()
				}
				start := time.Now()
				c, err := a.DialTimeout(tt.to, timeout)
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("DialTimeout(%s) = %v, want %v", tt.to, err, tt.wantErr)
				}
				if got := time.Since(start); got != tt.wait {
					t.Errorf("DialTimeout took %v of fake time, want %v", got, tt.wait)
				}
				if err != nil {
					if tt.wantErr == memnet.ErrTimeout {
						var ne net.Error
						if !errors.As(err, &ne) || !ne.Timeout() {
							t.Errorf("error %v is not a net.Error timeout", err)
						}
					}
					if s := n.Stats(); s.DialFailures != 1 {
						t.Errorf("DialFailures = %d, want 1", s.DialFailures)
					}
					return
				}
				srv := <-accepted
				checkPipe(t, c, srv)
				_ = c.Close()
				_ = srv.Close()
			})
		})
	}
}

// checkPipe sends a message each way and checks the reported addresses.
func checkPipe(t *testing.T, client, server net.Conn) {
	t.Helper()
	if client.LocalAddr().String() != addrA || client.RemoteAddr().String() != addrB {
		t.Errorf("client addrs = %v -> %v, want %s -> %s", client.LocalAddr(), client.RemoteAddr(), addrA, addrB)
	}
	if server.LocalAddr().String() != addrB || server.RemoteAddr().String() != addrA {
		t.Errorf("server addrs = %v -> %v, want %s -> %s", server.LocalAddr(), server.RemoteAddr(), addrB, addrA)
	}
	go func() { _, _ = client.Write([]byte("hello")) }()
	buf := make([]byte, 5)
	if _, err := io.ReadFull(server, buf); err != nil || string(buf) != "hello" {
		t.Errorf("server read %q, %v; want hello", buf, err)
	}
	go func() { _, _ = server.Write([]byte("world")) }()
	if _, err := io.ReadFull(client, buf); err != nil || string(buf) != "world" {
		t.Errorf("client read %q, %v; want world", buf, err)
	}
}

func TestCutsCloseStreams(t *testing.T) {
	tests := []struct {
		name string
		cut  func(n *memnet.Network, a, b *memnet.Transport)
	}{
		{"partition", func(n *memnet.Network, _, _ *memnet.Transport) { n.Partition([]string{addrA}, []string{addrB}) }},
		{"crash destination", func(n *memnet.Network, _, _ *memnet.Transport) { n.Crash(addrB) }},
		{"crash source", func(n *memnet.Network, _, _ *memnet.Transport) { n.Crash(addrA) }},
		{"shutdown destination", func(_ *memnet.Network, _, b *memnet.Transport) { _ = b.Shutdown() }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				n := memnet.New(1)
				a, b := n.Transport(addrA), n.Transport(addrB)
				got := make(chan net.Conn, 1)
				go func() { got <- <-b.StreamCh() }()
				c, err := a.DialTimeout(addrB, time.Second)
				if err != nil {
					t.Fatal(err)
				}
				srv := <-got
				tt.cut(n, a, b)
				if _, err := c.Read(make([]byte, 1)); err == nil {
					t.Error("client Read after cut = nil error, want closed")
				}
				if _, err := srv.Read(make([]byte, 1)); err == nil {
					t.Error("server Read after cut = nil error, want closed")
				}
				_ = c.Close()
				_ = srv.Close()
			})
		})
	}
}

func TestAddressReuse(t *testing.T) {
	n := memnet.New(1)
	n.Transport(addrA)
	mustPanic(t, "address in use", func() { n.Transport(addrA) })
	mustPanic(t, "malformed address", func() { n.Transport("localhost") })

	n.Crash(addrA)
	a2 := n.Transport(addrA) // restart after a crash
	b := n.Transport(addrB)
	if _, err := b.WriteTo([]byte("x"), addrA); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := received(a2); !ok {
		t.Errorf("restarted transport received nothing (stats %+v)", n.Stats())
	}
	_ = b.Shutdown()
	n.Transport(addrB) // restart after a shutdown
}

func mustPanic(t *testing.T, what string, f func()) {
	t.Helper()
	defer func() {
		if recover() == nil {
			t.Errorf("%s: no panic", what)
		}
	}()
	f()
}
