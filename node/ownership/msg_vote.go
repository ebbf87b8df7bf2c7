package ownership

import (
	"encoding/binary"
	"math"
	"strings"
	"time"

	"github.com/chime-scheduler/chime/slots"
)

// The vote family (slots, vote.go): a node that would take over a dead
// owner's grants asks the others to consent, and they answer.

// Consent asks for (Ask) or gives a consent to the sender's takeover of
// the grants of Owner's incarnation Inc up to vote term Term
// (slots.AskConsent, slots.GiveConsent; at the receiver
// slots.ConsentAsked, slots.ConsentGiven). It has no slot. A given
// consent carries Quiet (slots.ConsentGiven.Quiet), in nanoseconds; an
// ask carries 0.
//
//	kind flags(consentAsk) owner inc term quiet
type Consent struct {
	Ask       bool
	Owner     string
	Inc, Term uint64
	Quiet     time.Duration
}

// Flags of a Consent.
const consentAsk uint8 = 1

func (Consent) kind() uint8 { return kindConsent }
func (m Consent) size() int { return 2 + 4*binary.MaxVarintLen64 + len(m.Owner) }

func (m Consent) appendTo(b []byte) []byte {
	b = append(b, flag(m.Ask, consentAsk))
	b = appendName(b, m.Owner)
	b = binary.AppendUvarint(b, m.Inc)
	b = binary.AppendUvarint(b, m.Term)
	return binary.AppendUvarint(b, uint64(max(m.Quiet, 0)))
}

func decodeConsent(r *decoder) Msg {
	m := r.consents.next(r.left)
	m.Ask = r.flags(consentAsk)&consentAsk != 0
	m.Owner = r.name()
	m.Inc = r.uvarint()
	m.Term = r.uvarint()
	quiet := r.uvarint()
	if r.err == nil && (m.Owner == "" || strings.ContainsAny(m.Owner, "\t\n") || m.Inc == 0 || m.Term == 0) {
		// Member names hold no tab or newline (the store's consents
		// record could not keep one).
		r.fail("consent for owner %q incarnation %d term %d", m.Owner, m.Inc, m.Term)
	}
	if r.err == nil && (quiet > math.MaxInt64 || m.Ask && quiet != 0) {
		r.fail("consent quiet %d (ask %v)", quiet, m.Ask)
	}
	m.Quiet = time.Duration(quiet)
	return m
}

func (m Consent) event(from string) any {
	if m.Ask {
		return slots.ConsentAsked{From: from, Owner: m.Owner, Inc: m.Inc, Term: m.Term}
	}
	return slots.ConsentGiven{From: from, Owner: m.Owner, Inc: m.Inc, Term: m.Term, Quiet: m.Quiet}
}
