package ui

import (
	"time"

	"github.com/gorilla/websocket"
)

// client is one connected browser. The hub owns its membership and is the
// only sender on send; the writer goroutine is the only writer of data
// frames on conn; the handler goroutine that upgraded the connection is its
// only reader.
type client struct {
	conn   *websocket.Conn
	remote string
	send   chan *websocket.PreparedMessage // capacity Options.ClientQueue

	// closeCode and closeText are set by the hub just before it closes
	// send; the writer reads them after seeing send closed.
	closeCode int
	closeText string
}

// drop ends the client's stream with a close message of code and text.
// Only the hub calls it, once per client.
func (c *client) drop(code int, text string) {
	c.closeCode, c.closeText = code, text
	close(c.send)
}

// writeLoop writes queued snapshots and pings until send is closed (then
// it sends the close message) or a write fails. It closes conn on return,
// which also ends readLoop.
func (c *client) writeLoop(o Options) {
	ping := time.NewTicker(o.pingPeriod())
	defer ping.Stop()
	defer c.conn.Close()
	for {
		select {
		case m, ok := <-c.send:
			if !ok {
				msg := websocket.FormatCloseMessage(c.closeCode, c.closeText)
				_ = c.conn.WriteControl(websocket.CloseMessage, msg, deadline(o.WriteWait))
				return
			}
			if err := c.conn.SetWriteDeadline(deadline(o.WriteWait)); err != nil {
				return
			}
			if err := c.conn.WritePreparedMessage(m); err != nil {
				return
			}
		case <-ping.C:
			if err := c.conn.WriteControl(websocket.PingMessage, nil, deadline(o.WriteWait)); err != nil {
				return
			}
		}
	}
}

// readLoop reads (and discards) until the connection fails, is closed by
// the peer, exceeds the read limit or stays silent for PongWait. Reading
// is what processes pongs and the peer's close message.
func (c *client) readLoop(o Options) {
	c.conn.SetReadLimit(o.ReadLimit)
	_ = c.conn.SetReadDeadline(deadline(o.PongWait))
	c.conn.SetPongHandler(func(string) error {
		return c.conn.SetReadDeadline(deadline(o.PongWait))
	})
	for {
		if _, _, err := c.conn.NextReader(); err != nil {
			return
		}
	}
}

// deadline is the instant d from now, for the connection's deadlines.
func deadline(d time.Duration) time.Time { return time.Now().Add(d) }
