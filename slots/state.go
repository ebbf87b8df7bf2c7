package slots

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Epoch is a slot's ownership generation. Each new owner takes the previous
// epoch plus one; a message carrying a lower epoch than the receiver knows is
// rejected. Epoch 0 means the slot never had an owner.
type Epoch uint64

// Role is what one node is for one slot. The zero value RoleNone means the
// node holds nothing for the slot.
type Role uint8

// Roles. Persist writes the role of the moment; New reads any role but
// RoleNone back as a follower without a valid replica (one that was owner
// remembers it, to take its epoch back: see HandoverOffer.WasOwner).
const (
	// RoleNone: the node holds no data for the slot.
	RoleNone Role = iota
	// RoleFollower: the node holds (or is fetching) a replica from the owner
	// and acks its heartbeats; the one it grants the lease may promote.
	RoleFollower
	// RoleOwner: the node holds the slot's epoch. It fires the slot only while
	// it sees a majority and no other node can have taken it (Machine.Firing).
	RoleOwner
	// RoleImporting: the table names this node owner but it does not hold the
	// epoch yet: it is catching up, waiting for a handover or for the lease of
	// a dead owner to run out.
	RoleImporting
	// RoleSealing: the old owner of a planned move: it stopped firing and
	// waits for in-flight fires before it hands over its final (epoch, seq).
	RoleSealing
	// RoleUnavailable: the table names this node owner and it can neither
	// get a replica nor have the slot handed over: no live node it knows
	// holds one it could take over from. The slot is not started empty.
	RoleUnavailable
)

var roleNames = [...]string{"none", "follower", "owner", "importing", "sealing", "unavailable"}

// String returns the role's lower-case name, or "Role(n)".
func (r Role) String() string {
	if int(r) < len(roleNames) {
		return roleNames[r]
	}
	return "Role(" + strconv.Itoa(int(r)) + ")"
}

// parseRole is the inverse of Role.String.
func parseRole(s string) (Role, error) {
	for i, n := range roleNames {
		if n == s {
			return Role(i), nil
		}
	}
	return 0, fmt.Errorf("slots: unknown role %q", s)
}

// SlotState is the durable part of one slot's ownership, as node persists it
// in the slot's metadata (storage key s slot M) on every Persist effect.
type SlotState struct {
	Role  Role
	Epoch Epoch
	// Seq is the last applied replication sequence number at Epoch.
	Seq uint64
	// Grantee is, for an owner, the one node that may hold its lease grant
	// at Epoch and so could promote ("" if none, "*" if more than one). An
	// owner that restarts takes the slot back by handover from that node
	// only (see HandoverOffer). It is persisted before the grant is sent.
	Grantee string
	// Handed is, on a node that handed the slot over at Epoch-1 and kept
	// the final copy of that epoch (up to HandedSeq, its data for the
	// slot), the importer it handed it to, until that node takes Epoch as
	// far as this one knows. The importer may still need both after this
	// node restarted: the handover again if the first was lost, and the
	// final copy if its own lacks writes, which then nobody else holds.
	// Without the record a restarted holder could serve neither and the
	// slot stayed with nobody (sim seed 9825).
	Handed    string
	HandedSeq uint64
	// HandedBare marks a handover without a copy (Handed is set): this
	// node only gave up acting on Epoch-1, and the importer takes Epoch
	// with its own copy. It is recorded all the same: a restarted holder
	// that forgot it kept Epoch, which nobody may take but the importer,
	// without repeating the handover. The importer, which never got it,
	// stepped down to Epoch at our rejection of its offer, or the table
	// moved on and the slot's next owner followed Epoch and asked for a
	// copy of it for good (sim seeds 2167 and 22994 without the forget).
	HandedBare bool
	// HandedDropped names the dropped suspects the handover to Handed
	// carries (SendHandover.Dropped), comma-separated (node names hold no
	// comma), repeated with it after a restart.
	HandedDropped string
	// HandedTook is, once the record of a handover at Epoch-1 ended
	// because its importer took Epoch (Handed is empty then), that
	// importer: a handover of Epoch-1 from any other node is refused
	// after a restart too. Without it a node that handed Epoch-1 on, and
	// saw the node it handed it to take Epoch, took Epoch a second time
	// after a restart from the one holder whose own handover to it had
	// never arrived (sim seed 3301 with -simsteps 400).
	HandedTook string
	// FinalOf is, on a node that owned epoch FinalOf (below Epoch) before
	// a restart and has moved on since, its data unchanged, that epoch:
	// the data holds every write acknowledged at it, and an importer
	// handed FinalOf without a copy it may trust is served that copy
	// (sim seed 8429 without the forget). 0 when the data is not such.
	FinalOf Epoch
	// WasOwner is set on a node that holds the one complete copy of Epoch
	// that nobody else can act on without it, not as owner (Role says
	// follower): a restarted owner that has not taken its epoch back yet,
	// or one its grantee handed the epoch on to without keeping a grant
	// (HandoverDone). Such a node takes the epoch back (with grantee
	// Grantee) after a restart as an owner does. Without it a second
	// restart read the copy as a stale replica, asked the others for one
	// that nobody held, and the slot stayed unfired (sim seed 5122).
	WasOwner bool
}

// String renders the state as "owner@3#17" (role@epoch#seq), followed by
// ">grantee" when Grantee is set, by "^importer#seq" when Handed is
// (then "-" when HandedBare is, and "!a,b" when HandedDropped is) and by
// "=importer" when HandedTook is and "%epoch" when FinalOf is, with "+"
// after the role when WasOwner is set.
func (s SlotState) String() string {
	str := s.Role.String()
	if s.WasOwner {
		str += "+"
	}
	str += "@" + strconv.FormatUint(uint64(s.Epoch), 10) + "#" + strconv.FormatUint(s.Seq, 10)
	if s.Grantee != "" {
		str += ">" + s.Grantee
	}
	if s.Handed != "" {
		str += "^" + s.Handed + "#" + strconv.FormatUint(s.HandedSeq, 10)
		if s.HandedBare {
			str += "-"
		}
		if s.HandedDropped != "" {
			str += "!" + s.HandedDropped
		}
	}
	if s.HandedTook != "" {
		str += "=" + s.HandedTook
	}
	if s.FinalOf != 0 {
		str += "%" + strconv.FormatUint(uint64(s.FinalOf), 10)
	}
	return str
}

// FormatStates renders a state map compactly, grouping runs of adjacent slots
// with equal state, in slot order:
//
//	owner@1#0>n2:[0-5460] follower@1#0:[5461-10922]
//
// It is the inverse of ParseStates. The output never depends on map order.
// O(n log n) in the number of entries.
func FormatStates(m map[Slot]SlotState) string {
	keys := make([]Slot, 0, len(m))
	for s := range m {
		keys = append(keys, s)
	}
	slices.Sort(keys)
	var b strings.Builder
	for i := 0; i < len(keys); {
		j := i
		for j+1 < len(keys) && keys[j+1] == keys[j]+1 && m[keys[j+1]] == m[keys[i]] {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(m[keys[i]].String())
		b.WriteString(":[")
		b.WriteString(strconv.Itoa(int(keys[i])))
		if j > i {
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(int(keys[j])))
		}
		b.WriteByte(']')
		i = j + 1
	}
	return b.String()
}

// ParseStates parses the FormatStates notation. Runs may be given in any
// order but may not overlap.
func ParseStates(text string) (map[Slot]SlotState, error) {
	m := make(map[Slot]SlotState)
	for _, f := range strings.Fields(text) {
		head, rng, ok := strings.Cut(f, ":[")
		if !ok || !strings.HasSuffix(rng, "]") {
			return nil, fmt.Errorf("slots: bad run %q, want role[+]@epoch#seq[>grantee][^importer#seq][=importer][%%epoch]:[from-to]", f)
		}
		st, err := parseState(head)
		if err != nil {
			return nil, err
		}
		from, to, err := parseRange(strings.TrimSuffix(rng, "]"))
		if err != nil {
			return nil, err
		}
		for s := from; s <= to; s++ {
			if _, dup := m[Slot(s)]; dup {
				return nil, fmt.Errorf("slots: slot %d given twice", s)
			}
			m[Slot(s)] = st
		}
	}
	return m, nil
}

func parseState(s string) (SlotState, error) {
	s, finalOf, hasFinal := strings.Cut(s, "%")
	var final uint64
	if hasFinal {
		var err error
		if final, err = strconv.ParseUint(finalOf, 10, 64); err != nil || final == 0 {
			return SlotState{}, fmt.Errorf("slots: bad state %q: the epoch after %% is a positive integer", s)
		}
	}
	s, took, _ := strings.Cut(s, "=")
	s, handed, isHanded := strings.Cut(s, "^")
	s, grantee, _ := strings.Cut(s, ">")
	role, rest, ok1 := strings.Cut(s, "@")
	ep, seq, ok2 := strings.Cut(rest, "#")
	if !ok1 || !ok2 {
		return SlotState{}, fmt.Errorf("slots: bad state %q, want role@epoch#seq", s)
	}
	role, wasOwner := strings.CutSuffix(role, "+")
	r, err := parseRole(role)
	if err != nil {
		return SlotState{}, err
	}
	e, err1 := strconv.ParseUint(ep, 10, 64)
	q, err2 := strconv.ParseUint(seq, 10, 64)
	if err1 != nil || err2 != nil {
		return SlotState{}, fmt.Errorf("slots: bad state %q: epoch and seq are unsigned integers", s)
	}
	st := SlotState{Role: r, Epoch: Epoch(e), Seq: q, Grantee: grantee, WasOwner: wasOwner, HandedTook: took, FinalOf: Epoch(final)}
	if isHanded {
		handed, dropped, _ := strings.Cut(handed, "!")
		name, hseq, ok := strings.Cut(handed, "#")
		hseq, bare := strings.CutSuffix(hseq, "-")
		hq, err := strconv.ParseUint(hseq, 10, 64)
		if !ok || name == "" || err != nil {
			return SlotState{}, fmt.Errorf("slots: bad handover %q, want ^importer#seq[-][!dropped,…]", handed)
		}
		st.Handed, st.HandedSeq, st.HandedBare, st.HandedDropped = name, hq, bare, dropped
	}
	return st, nil
}

// parseRange parses "7" or "0-5460" into an inclusive range within a slot.
func parseRange(s string) (from, to int, err error) {
	a, b, isRange := strings.Cut(s, "-")
	from, err = strconv.Atoi(a)
	if err != nil {
		return 0, 0, fmt.Errorf("slots: bad range %q", s)
	}
	to = from
	if isRange {
		if to, err = strconv.Atoi(b); err != nil {
			return 0, 0, fmt.Errorf("slots: bad range %q", s)
		}
	}
	if from < 0 || to < from || to > 0xffff {
		return 0, 0, fmt.Errorf("slots: bad range %q", s)
	}
	return from, to, nil
}
