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
	msgIntentState byte = 2 // msgpack array of leaveIntent: push/pull state (LocalState)
)

// maxStateIntents bounds the leave intents one push/pull state carries
// and that MergeRemoteState accepts: far more members than a cluster has.
const maxStateIntents = 4096

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
// never marks its restarted successor. Forgot says an operator declared
// that run gone for good (Forget) rather than the node leaving itself:
// its data is lost with it (slots: MemberDead.Forgot). Older decoders
// skip the key.
type leaveIntent struct {
	Name   string `msgpack:"n"`
	BootID uint64 `msgpack:"b"`
	Forgot bool   `msgpack:"f,omitempty"`
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

// encodeIntentState encodes lis as [msgIntentState][msgpack array].
func encodeIntentState(lis []leaveIntent) []byte {
	body, err := msgpack.Marshal(lis)
	if err != nil {
		panic(fmt.Sprintf("gossip: msgpack of leave intents cannot fail: %v", err)) // invariant
	}
	return append([]byte{msgIntentState}, body...)
}

// decodeIntentState decodes what encodeIntentState made. The count is
// checked against maxStateIntents and the bytes left before anything is
// allocated; junk, a nameless intent and trailing bytes give an error
// wrapping errMessage. It never panics (FuzzDecodeIntentState).
func decodeIntentState(b []byte) ([]leaveIntent, error) {
	if len(b) == 0 || b[0] != msgIntentState {
		return nil, fmt.Errorf("%w: not an intent state", errMessage)
	}
	r := bytes.NewReader(b[1:])
	dec := msgpack.NewDecoder(r)
	n, err := dec.DecodeArrayLen()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errMessage, err)
	}
	// An intent takes at least 3 bytes (a map header and two keys).
	if n < 0 || n > maxStateIntents || n > r.Len()/3 {
		return nil, fmt.Errorf("%w: %d intents in %d bytes", errMessage, n, r.Len())
	}
	lis := make([]leaveIntent, 0, n)
	for range n {
		var li leaveIntent
		if err := dec.Decode(&li); err != nil {
			return nil, fmt.Errorf("%w: %w", errMessage, err)
		}
		if li.Name == "" {
			return nil, fmt.Errorf("%w: leave intent without a name", errMessage)
		}
		lis = append(lis, li)
	}
	if r.Len() != 0 {
		return nil, fmt.Errorf("%w: %d trailing bytes", errMessage, r.Len())
	}
	return lis, nil
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
