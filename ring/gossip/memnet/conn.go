package memnet

import (
	"net"
	"sync"
)

// conn is one end of a stream: a net.Pipe end that reports IP:port
// addresses (memberlist logs them) and leaves the network's registry of
// open streams when closed, so Partition and Crash can cut it.
type conn struct {
	net.Conn
	net       *Network
	local     *Transport
	remote    *Transport
	closeOnce sync.Once
}

// pipe creates a registered stream between src (the returned client end)
// and dst (the server end).
func (n *Network) pipe(src, dst *Transport) (client, server *conn) {
	a, b := net.Pipe()
	client = &conn{Conn: a, net: n, local: src, remote: dst}
	server = &conn{Conn: b, net: n, local: dst, remote: src}
	n.mu.Lock()
	n.mu.conns[client] = struct{}{}
	n.mu.conns[server] = struct{}{}
	n.mu.Unlock()
	return client, server
}

// LocalAddr returns the address of the transport holding this end.
func (c *conn) LocalAddr() net.Addr { return c.local.tcp }

// RemoteAddr returns the address of the transport at the other end.
func (c *conn) RemoteAddr() net.Addr { return c.remote.tcp }

// Close closes this end (the peer's reads then fail with io.EOF) and
// deregisters it. Later calls return nil.
func (c *conn) Close() error {
	var err error
	c.closeOnce.Do(func() {
		c.net.mu.Lock()
		delete(c.net.mu.conns, c)
		c.net.mu.Unlock()
		err = c.Conn.Close()
	})
	return err
}
