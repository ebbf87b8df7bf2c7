package ownership

import (
	"encoding/binary"
	"strings"
)

// The genesis family: how a node that was part of a new cluster's first
// table but did not bootstrap with it learns that table. Nodes bootstrap
// a new cluster each on its own, once its view settled (Executor.tableEvent);
// a node whose view settled later, after another member joined, computes
// another table, and its own slots of the first table would be owned by
// nobody. So a fresh node that sees a member advertise a genesis checksum
// other than its table's asks that member for the genesis table's members
// (GenesisAsk) and bootstraps with that table if it is in it
// (GenesisTable). Neither reaches the machine: the executor answers and
// bootstraps.

// GenesisAsk asks a node for the members of the table whose checksum is
// Sum, the one it started a new cluster with.
//
//	kind sum(8 bytes, big-endian)
type GenesisAsk struct {
	Sum uint64
}

func (GenesisAsk) kind() uint8 { return kindGenesisAsk }
func (GenesisAsk) size() int   { return 1 + 8 }

func (m GenesisAsk) appendTo(b []byte) []byte { return binary.BigEndian.AppendUint64(b, m.Sum) }

func decodeGenesisAsk(r *decoder) Msg {
	return &GenesisAsk{Sum: r.uint64()}
}

func (m GenesisAsk) event(from string) any { return genesisAsked{from: from, sum: m.Sum} }

// GenesisTable answers a GenesisAsk: the member names (ascending, each
// once) of the table whose checksum is Sum. The receiver checks the
// checksum itself (ring.Assign over Names).
//
//	kind sum(8 bytes, big-endian) uvarint(count ≥ 1) name*
type GenesisTable struct {
	Sum   uint64
	Names []string
}

// maxGenesisMembers bounds GenesisTable.Names (the bytes left bound it
// further): a first table of more members than this is not a table any
// cluster starts with.
const maxGenesisMembers = 4096

func (GenesisTable) kind() uint8 { return kindGenesisTable }
func (m GenesisTable) size() int {
	n := 1 + 8 + binary.MaxVarintLen64
	for _, s := range m.Names {
		n += binary.MaxVarintLen64 + len(s)
	}
	return n
}

func (m GenesisTable) appendTo(b []byte) []byte {
	b = binary.BigEndian.AppendUint64(b, m.Sum)
	b = binary.AppendUvarint(b, uint64(len(m.Names)))
	for _, s := range m.Names {
		b = appendName(b, s)
	}
	return b
}

func decodeGenesisTable(r *decoder) Msg {
	m := &GenesisTable{Sum: r.uint64()}
	n := r.uvarint()
	if r.err != nil {
		return m
	}
	// Each name takes at least two bytes (its length and one byte).
	if n == 0 || n > maxGenesisMembers || n > uint64(len(r.p)/2) {
		r.fail("genesis table of %d members in %d bytes", n, len(r.p))
		return m
	}
	m.Names = make([]string, 0, n)
	for range n {
		s := r.name()
		if r.err != nil {
			return m
		}
		if s == "" || strings.ContainsRune(s, '\n') || (len(m.Names) > 0 && s <= m.Names[len(m.Names)-1]) {
			r.fail("genesis member %q: empty, with a newline or out of order", s)
			return m
		}
		m.Names = append(m.Names, s)
	}
	return m
}

func (m GenesisTable) event(from string) any {
	return genesisTold{from: from, sum: m.Sum, names: m.Names}
}

// genesisAsked and genesisTold are what the board posts for a GenesisAsk
// and a GenesisTable, for the executor (not the machine).
type genesisAsked struct {
	from string
	sum  uint64
}

type genesisTold struct {
	from  string
	sum   uint64
	names []string
}
