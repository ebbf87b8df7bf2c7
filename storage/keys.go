package storage

import "encoding/binary"

// Key prefix bytes. The layout table is in doc.go. These values are written
// to disk: ONLY APPEND to this list, never change or reuse a value.
const (
	prefixSlot byte = 's' // per-slot keys: 's' slot(u16 BE) section ...
	prefixNode byte = 'n' // node-local keys: 'n' name

	sectionDue      byte = 'D' // due index: wake(u64 BE) id -> empty
	sectionHistory  byte = 'H' // history: id 0x00 seq(u64 BE) -> Execution
	sectionMeta     byte = 'M' // slot meta: SlotMeta (replica.go)
	sectionTask     byte = 'T' // task: id -> Task
	sectionChecksum byte = 'C' // the slot's checksum: nothing after the section byte
	sectionExecLog  byte = 'E' // execution log index: outcome finished(u64 BE) id 0x00 seq(u64 BE) -> empty
	sectionFlow     byte = 'F' // flow definition: key -> Flow (flow.go)
)

// Outcome bytes of an execution log index key (sectionExecLog).
const (
	outcomeFailed    byte = 'f'
	outcomeSucceeded byte = 's'
)

// isDataSection reports whether keys of section are the slot's data: what
// is replicated (captured, snapshotted) and what the slot checksum covers.
// The meta and checksum keys are each node's own bookkeeping.
func isDataSection(section byte) bool {
	return section == sectionTask || section == sectionDue || section == sectionHistory || section == sectionExecLog ||
		section == sectionFlow
}

// Node-local keys ('n' name). Written to disk: never change a name.
var (
	// nodeKeyChecksums holds the version of the slot checksum scheme the
	// store maintains (ChecksumVersion); Open rebuilds every slot's
	// checksum when it is missing or different.
	nodeKeyChecksums = []byte("nchecksums")
	// nodeKeyVoters holds the members the node counts its majority among
	// (slots.Voters), newline-separated, so a restart keeps them.
	nodeKeyVoters = []byte("nvoters")
	// nodeKeyConsents holds the consents the node gave to takeovers of
	// another node's grants (slots.Consent, the exclusive vote): one per
	// line, so a restart promises nothing it consented away.
	nodeKeyConsents = []byte("nconsents")
)

// histSep ends the id inside a history key. IDs never contain it, so the
// history of one id is exactly [H id 0x00, H id 0x01).
const histSep byte = 0x00

// MaxIDLen is the longest task id ValidID accepts.
const MaxIDLen = 128

// slotPrefixLen is the length of 's' slot.
const slotPrefixLen = 3

// dueIDOffset is where the id starts in a due key: 's' slot 'D' wake.
const dueIDOffset = slotPrefixLen + 1 + 8

// ValidID reports whether id can be stored: 1 to MaxIDLen characters of
// A-Z a-z 0-9 . _ ~ : - { } (braces make a hash tag, slots.HashKey).
// Storage keys rely on this (an id never contains 0x00); Batch methods
// panic on an invalid id, so callers validate first.
func ValidID(id string) bool {
	if len(id) == 0 || len(id) > MaxIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c == '.', c == '_', c == '~', c == ':', c == '-', c == '{', c == '}':
		default:
			return false
		}
	}
	return true
}

// appendSlotPrefix appends 's' slot.
func appendSlotPrefix(dst []byte, slot uint16) []byte {
	return binary.BigEndian.AppendUint16(append(dst, prefixSlot), slot)
}

// appendSection appends 's' slot section.
func appendSection(dst []byte, slot uint16, section byte) []byte {
	return append(appendSlotPrefix(dst, slot), section)
}

// appendChecksumKey appends 's' slot 'C', the key of the slot's checksum.
func appendChecksumKey(dst []byte, slot uint16) []byte {
	return appendSection(dst, slot, sectionChecksum)
}

// appendTaskKey appends 's' slot 'T' id.
func appendTaskKey(dst []byte, slot uint16, id string) []byte {
	return append(appendSection(dst, slot, sectionTask), id...)
}

// appendDueKey appends 's' slot 'D' wake(u64 BE) id. wake must be >= 0.
func appendDueKey(dst []byte, slot uint16, wake int64, id string) []byte {
	dst = binary.BigEndian.AppendUint64(appendSection(dst, slot, sectionDue), uint64(wake))
	return append(dst, id...)
}

// appendHistPrefix appends 's' slot 'H' id 0x00, the start of id's history.
func appendHistPrefix(dst []byte, slot uint16, id string) []byte {
	return append(append(appendSection(dst, slot, sectionHistory), id...), histSep)
}

// appendHistEnd appends 's' slot 'H' id 0x01, the exclusive end of id's history.
func appendHistEnd(dst []byte, slot uint16, id string) []byte {
	return append(append(appendSection(dst, slot, sectionHistory), id...), histSep+1)
}

// appendHistKey appends 's' slot 'H' id 0x00 seq(u64 BE).
func appendHistKey(dst []byte, slot uint16, id string, seq uint64) []byte {
	return binary.BigEndian.AppendUint64(appendHistPrefix(dst, slot, id), seq)
}

// appendSlotEnd appends the exclusive end of slot's key range: the prefix of
// slot+1, or 't' after the last slot.
func appendSlotEnd(dst []byte, slot uint16) []byte {
	if slot == ^uint16(0) {
		return append(dst, prefixSlot+1)
	}
	return appendSlotPrefix(dst, slot+1)
}

// decodeSlotKey splits a per-slot key into its slot, section and the rest.
func decodeSlotKey(k []byte) (slot uint16, section byte, rest []byte, ok bool) {
	if len(k) < slotPrefixLen+1 || k[0] != prefixSlot {
		return 0, 0, nil, false
	}
	return binary.BigEndian.Uint16(k[1:3]), k[3], k[4:], true
}

// decodeTaskKey is the inverse of appendTaskKey.
func decodeTaskKey(k []byte) (slot uint16, id string, ok bool) {
	slot, section, rest, ok := decodeSlotKey(k)
	if !ok || section != sectionTask || len(rest) == 0 {
		return 0, "", false
	}
	return slot, string(rest), true
}

// decodeDueKey is the inverse of appendDueKey.
func decodeDueKey(k []byte) (slot uint16, wake int64, id string, ok bool) {
	slot, section, rest, ok := decodeSlotKey(k)
	if !ok || section != sectionDue || len(rest) <= 8 {
		return 0, 0, "", false
	}
	w := binary.BigEndian.Uint64(rest)
	if w > 1<<63-1 {
		return 0, 0, "", false
	}
	return slot, int64(w), string(rest[8:]), true
}

// decodeHistKey is the inverse of appendHistKey.
func decodeHistKey(k []byte) (slot uint16, id string, seq uint64, ok bool) {
	slot, section, rest, ok := decodeSlotKey(k)
	// rest = id 0x00 seq(8), with a non-empty id.
	if !ok || section != sectionHistory || len(rest) < 1+1+8 || rest[len(rest)-9] != histSep {
		return 0, "", 0, false
	}
	idb := rest[:len(rest)-9]
	for _, c := range idb {
		if c == histSep {
			return 0, "", 0, false
		}
	}
	return slot, string(idb), binary.BigEndian.Uint64(rest[len(rest)-8:]), true
}

// appendExecLogPrefix appends 's' slot 'E' outcome.
func appendExecLogPrefix(dst []byte, slot uint16, outcome byte) []byte {
	return append(appendSection(dst, slot, sectionExecLog), outcome)
}

// appendExecLogTime appends 's' slot 'E' outcome finished(u64 BE): a seek
// key before every entry of that instant.
func appendExecLogTime(dst []byte, slot uint16, outcome byte, finished int64) []byte {
	return binary.BigEndian.AppendUint64(appendExecLogPrefix(dst, slot, outcome), uint64(max(finished, 0)))
}

// appendExecLogKey appends 's' slot 'E' outcome finished(u64 BE) id 0x00
// seq(u64 BE), the index entry of history record (slot, id, seq).
func appendExecLogKey(dst []byte, slot uint16, outcome byte, finished int64, id string, seq uint64) []byte {
	dst = append(append(appendExecLogTime(dst, slot, outcome, finished), id...), histSep)
	return binary.BigEndian.AppendUint64(dst, seq)
}

// decodeExecLogKey is the inverse of appendExecLogKey.
func decodeExecLogKey(k []byte) (slot uint16, outcome byte, finished int64, id string, seq uint64, ok bool) {
	slot, section, rest, ok := decodeSlotKey(k)
	// rest = outcome finished(8) id 0x00 seq(8), with a non-empty id.
	if !ok || section != sectionExecLog || len(rest) < 1+8+1+1+8 || rest[len(rest)-9] != histSep {
		return 0, 0, 0, "", 0, false
	}
	f := binary.BigEndian.Uint64(rest[1:])
	if f > 1<<63-1 {
		return 0, 0, 0, "", 0, false
	}
	idb := rest[9 : len(rest)-9]
	for _, c := range idb {
		if c == histSep {
			return 0, 0, 0, "", 0, false
		}
	}
	return slot, rest[0], int64(f), string(idb), binary.BigEndian.Uint64(rest[len(rest)-8:]), true
}

// execOutcome is the outcome byte of e's index entry.
func execOutcome(e *Execution) byte {
	if e.Failed() {
		return outcomeFailed
	}
	return outcomeSucceeded
}
