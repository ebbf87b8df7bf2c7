package storage

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/cockroachdb/pebble/v2"
)

// Consent is one consent the node gave (slots.Consent): to Taker's
// takeover of the grants of Owner's incarnation Inc up to vote term Term.
type Consent struct {
	Owner, Taker string
	Inc, Term    uint64
}

// Consents returns the node's persisted consents (nil if none).
func (s *Store) Consents() ([]Consent, error) {
	v, _, err := s.nodeValue(nodeKeyConsents, "consents")
	if err != nil {
		return nil, err
	}
	return parseConsents(v)
}

// parseConsents reads SetConsents' encoding: "owner\ttaker\tinc\tterm"
// lines.
func parseConsents(v string) ([]Consent, error) {
	if v == "" {
		return nil, nil
	}
	var out []Consent
	for line := range strings.SplitSeq(v, "\n") {
		f := strings.Split(line, "\t")
		if len(f) != 4 || f[0] == "" || f[1] == "" {
			return nil, fmt.Errorf("storage: consent %q: want owner, taker, incarnation and term", line)
		}
		inc, err1 := strconv.ParseUint(f[2], 10, 64)
		term, err2 := strconv.ParseUint(f[3], 10, 64)
		if err := errors.Join(err1, err2); err != nil {
			return nil, fmt.Errorf("storage: consent %q: %w", line, err)
		}
		out = append(out, Consent{Owner: f[0], Taker: f[1], Inc: inc, Term: term})
	}
	return out, nil
}

// SetConsents saves the node's consents durably, replacing the ones
// saved before. Names must not contain a tab or a newline (member names
// never do).
func (s *Store) SetConsents(cs []Consent) (err error) {
	if err := s.Failed(); err != nil {
		return err
	}
	if !s.enter() {
		return ErrClosed
	}
	defer s.leave()
	defer s.catch(&err)
	var b strings.Builder
	for i, c := range cs {
		for _, n := range []string{c.Owner, c.Taker} {
			if n == "" || strings.ContainsAny(n, "\t\n") {
				return fmt.Errorf("storage: consent name %q: empty or with a tab or newline", n)
			}
		}
		if i > 0 {
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "%s\t%s\t%d\t%d", c.Owner, c.Taker, c.Inc, c.Term)
	}
	if err := s.db.Set(nodeKeyConsents, []byte(b.String()), pebble.Sync); err != nil {
		return fmt.Errorf("storage: save consents: %w", err)
	}
	return nil
}
