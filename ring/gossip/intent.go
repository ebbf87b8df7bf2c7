package gossip

import (
	"bytes"
	"errors"
	"fmt"
	"sync"

	"github.com/hashicorp/memberlist"
	"github.com/vmihailenco/msgpack/v5"
)

// Gossip message types: the first byte of every user message this package
// piggybacks on memberlist's gossip. ONLY APPEND to this list; a value,
// once released, keeps its meaning forever.
const (
	msgLeaveIntent byte = 1 // msgpack leaveIntent
)

// errMessage is wrapped by decodeMessage for input it does not understand.
var errMessage = errors.New("gossip: bad gossip message")

// leaveIntent announces that a node is leaving on purpose.
//
// memberlist knows a leave from a failure (the dead message comes from the
// node itself) but does not tell its EventDelegate: NotifyLeave is the same
// for both and Node.State is not maintained. So, like Serf, a leaving node
// first gossips this intent; receivers report its death as StatusLeft, and
// an intent that arrives after the death turns a dead member into a left
// one. BootID scopes the intent to one run of the node, so a stale intent
// never marks its restarted successor.
type leaveIntent struct {
	Name   string `msgpack:"n"`
	BootID uint64 `msgpack:"b"`
}

// encodeLeaveIntent encodes li as [msgLeaveIntent][msgpack body].
func encodeLeaveIntent(li leaveIntent) []byte {
	body, err := msgpack.Marshal(li)
	if err != nil {
		panic(fmt.Sprintf("gossip: msgpack of a leaveIntent cannot fail: %v", err)) // invariant
	}
	return append([]byte{msgLeaveIntent}, body...)
}

// decodeMessage decodes a user message. Unknown types, malformed bodies and
// trailing bytes give an error wrapping errMessage; it never panics
// (FuzzDecodeMessage).
func decodeMessage(b []byte) (leaveIntent, error) {
	if len(b) == 0 {
		return leaveIntent{}, fmt.Errorf("%w: empty", errMessage)
	}
	if b[0] != msgLeaveIntent {
		return leaveIntent{}, fmt.Errorf("%w: unknown type %d", errMessage, b[0])
	}
	r := bytes.NewReader(b[1:])
	var li leaveIntent
	if err := msgpack.NewDecoder(r).Decode(&li); err != nil {
		return leaveIntent{}, fmt.Errorf("%w: %w", errMessage, err)
	}
	if r.Len() != 0 {
		return leaveIntent{}, fmt.Errorf("%w: %d trailing bytes", errMessage, r.Len())
	}
	if li.Name == "" {
		return leaveIntent{}, fmt.Errorf("%w: leave intent without a name", errMessage)
	}
	return li, nil
}

// intentBroadcast queues a leave intent in memberlist's transmit-limited
// queue. A newer intent for the same name replaces an older one.
type intentBroadcast struct {
	name string
	msg  []byte
	once sync.Once
	done chan struct{} // closed by Finished; nil if nobody waits
}

var _ memberlist.NamedBroadcast = (*intentBroadcast)(nil)

func newIntentBroadcast(li leaveIntent, done chan struct{}) *intentBroadcast {
	return &intentBroadcast{name: "leave/" + li.Name, msg: encodeLeaveIntent(li), done: done}
}

// Invalidates implements memberlist.Broadcast.
func (b *intentBroadcast) Invalidates(other memberlist.Broadcast) bool {
	o, ok := other.(*intentBroadcast)
	return ok && o.name == b.name
}

// Name implements memberlist.NamedBroadcast.
func (b *intentBroadcast) Name() string { return b.name }

// Message implements memberlist.Broadcast.
func (b *intentBroadcast) Message() []byte { return b.msg }

// Finished implements memberlist.Broadcast: the intent was retransmitted
// enough times, or replaced.
func (b *intentBroadcast) Finished() {
	b.once.Do(func() {
		if b.done != nil {
			close(b.done)
		}
	})
}
