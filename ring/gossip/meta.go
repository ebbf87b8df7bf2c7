package gossip

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/hashicorp/memberlist"
	"github.com/vmihailenco/msgpack/v5"
)

// MetaMaxSize is the largest encoded Meta memberlist carries (512 bytes).
const MetaMaxSize = memberlist.MetaMaxSize

// Meta versions: the first byte of an encoded Meta. ONLY APPEND to this
// list; a value, once released, keeps its meaning forever.
const (
	metaV1 byte = 1 // msgpack map of metaBodyV1
)

// ErrMeta is returned (wrapped) by DecodeMeta for input that is not a
// Meta this version understands, and by EncodeMeta, Start and SetState for
// a Meta that cannot be sent.
var ErrMeta = errors.New("gossip: bad node meta")

// State is a node's lifecycle state, carried in its Meta. Only active
// members own slots (DESIGN §2).
//
// The numeric values are on the wire: ONLY APPEND new states.
type State uint8

// The states. The zero value means the state is unknown (never sent, or
// the member's meta could not be decoded); such a member is not eligible
// for slots.
const (
	StateUnknown  State = 0
	StateJoining  State = 1 // started, loading; owns nothing yet
	StateActive   State = 2 // eligible to own and follow slots
	StateDraining State = 3 // handing its slots off before leaving
)

// String returns "joining", "active", "draining" or "unknown(N)".
func (s State) String() string {
	switch s {
	case StateJoining:
		return "joining"
	case StateActive:
		return "active"
	case StateDraining:
		return "draining"
	default:
		return fmt.Sprintf("unknown(%d)", uint8(s))
	}
}

// Valid reports whether s is one of the named states other than
// StateUnknown.
func (s State) Valid() bool { return s >= StateJoining && s <= StateDraining }

// Meta is the small per-node metadata memberlist gossips with membership.
// Everything bulky travels over HTTP between nodes instead.
type Meta struct {
	// HTTPAddr is where the node serves the API and internal endpoints
	// (host:port).
	HTTPAddr string
	// BootID changes on every process start, so peers can tell a restarted
	// node (same Name) from one that only flapped.
	BootID uint64
	// State is the node's lifecycle state.
	State State
	// Proto is the node's inter-node (HTTP) protocol version; peers use it
	// to avoid features an older node lacks.
	Proto uint8
	// Fresh says the node holds no data of any slot and never owned one:
	// a cluster whose members are all fresh starts from nothing (the only
	// way a slot gets its first owner). It turns false for good once the
	// node holds slot state.
	Fresh bool
	// Genesis is the checksum of the slot table this node started a new
	// cluster with (0: none). A fresh node may start the cluster with the
	// same table too: the members agree on every slot's first owner.
	Genesis uint64
	// TLS says HTTPAddr serves HTTPS: other members call it over TLS.
	TLS bool
	// Empty says this run started with no slot state (a new or wiped data
	// dir). Unlike Fresh it never turns false: a member that sees a node
	// come back as a new run that started empty knows it kept nothing of
	// its earlier run (slots.MemberAlive.Empty).
	Empty bool
}

// metaBodyV1 is the msgpack body of a version-1 Meta. Keys are short to
// leave room for HTTPAddr within MetaMaxSize; new fields get new keys and
// old decoders ignore them.
type metaBodyV1 struct {
	HTTPAddr string `msgpack:"h"`
	BootID   uint64 `msgpack:"b"`
	State    uint8  `msgpack:"s"`
	Proto    uint8  `msgpack:"p"`
	Fresh    bool   `msgpack:"f,omitempty"`
	Genesis  uint64 `msgpack:"g,omitempty"`
	TLS      bool   `msgpack:"t,omitempty"`
	Empty    bool   `msgpack:"e,omitempty"`
}

// EncodeMeta encodes m as [version byte][msgpack body]. It fails (ErrMeta)
// if m.State is not valid or the encoding exceeds MetaMaxSize; the other
// fields take at most 46 bytes, so any HTTPAddr up to 466 bytes fits.
func EncodeMeta(m Meta) ([]byte, error) {
	if !m.State.Valid() {
		return nil, fmt.Errorf("%w: state %v", ErrMeta, m.State)
	}
	body, err := msgpack.Marshal(metaBodyV1{HTTPAddr: m.HTTPAddr, BootID: m.BootID, State: uint8(m.State), Proto: m.Proto, Fresh: m.Fresh, Genesis: m.Genesis, TLS: m.TLS, Empty: m.Empty})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMeta, err)
	}
	b := append([]byte{metaV1}, body...)
	if len(b) > MetaMaxSize {
		return nil, fmt.Errorf("%w: %d bytes encoded, max %d", ErrMeta, len(b), MetaMaxSize)
	}
	return b, nil
}

// DecodeMeta decodes what EncodeMeta produced. Empty input, an unknown
// version, a malformed body, trailing bytes, an invalid state or input
// longer than MetaMaxSize give an error wrapping ErrMeta; it never panics
// (FuzzDecodeMeta).
func DecodeMeta(b []byte) (Meta, error) {
	switch {
	case len(b) == 0:
		return Meta{}, fmt.Errorf("%w: empty", ErrMeta)
	case len(b) > MetaMaxSize:
		return Meta{}, fmt.Errorf("%w: %d bytes, max %d", ErrMeta, len(b), MetaMaxSize)
	case b[0] != metaV1:
		return Meta{}, fmt.Errorf("%w: unknown version %d", ErrMeta, b[0])
	}
	r := bytes.NewReader(b[1:])
	var body metaBodyV1
	if err := msgpack.NewDecoder(r).Decode(&body); err != nil {
		return Meta{}, fmt.Errorf("%w: %w", ErrMeta, err)
	}
	if r.Len() != 0 {
		return Meta{}, fmt.Errorf("%w: %d trailing bytes", ErrMeta, r.Len())
	}
	m := Meta{HTTPAddr: body.HTTPAddr, BootID: body.BootID, State: State(body.State), Proto: body.Proto, Fresh: body.Fresh, Genesis: body.Genesis, TLS: body.TLS, Empty: body.Empty}
	if !m.State.Valid() {
		return Meta{}, fmt.Errorf("%w: state %v", ErrMeta, m.State)
	}
	return m, nil
}
