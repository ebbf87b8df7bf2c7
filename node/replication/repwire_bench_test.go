package replication

import "testing"

// The replication hot path, both ways: a write group's request (64 slots'
// ops of ~200 bytes each, as a busy owner ships them) and a bootstrap's
// (a batch of 4,096 empty snapshots), each with its answer. BenchmarkRep
// Wire runs the hand-written codec (repwire.go), BenchmarkRepWireMsgpack
// msgpack's reflection on the same structs; both run the checkMsgpack guard
// a peer's body gets first. The hand-written codec stays only while it is
// at least twice as fast.

type repBenchCase struct {
	name string
	req  Request
	ans  Answer
}

func repBench() []repBenchCase {
	groups := Request{From: "node-7", Msgs: make([]Msg, 64)}
	for i := range groups.Msgs {
		groups.Msgs[i] = Msg{Slot: uint16(i * 97), Epoch: 3, Seq: uint64(1e6 + i), PrevEpoch: 3, PrevSeq: uint64(1e6 + i - 1),
			Count: 2, Data: make([]byte, 200)}
	}
	snaps := Request{From: "node-7", Msgs: make([]Msg, maxBatch)}
	for i := range snaps.Msgs {
		snaps.Msgs[i] = Msg{Slot: uint16(i), Epoch: 1, Reset: true, Snap: true, Sent: 1_800_000_000_000_000_000 + int64(i), Grant: true, Owner: true, SnapEpoch: 1}
	}
	answer := func(n int) Answer {
		a := Answer{Results: make([]uint8, n), Epochs: make([]uint64, n)}
		for i := range a.Epochs {
			a.Epochs[i] = 3
		}
		return a
	}
	return []repBenchCase{{"groups", groups, answer(len(groups.Msgs))}, {"snapshots", snaps, answer(len(snaps.Msgs))}}
}

func BenchmarkRepWire(b *testing.B) {
	for _, c := range repBench() {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				body := encodeRequest(&c.req)
				if err := checkMsgpack(body); err != nil {
					b.Fatal(err)
				}
				if _, err := decodeRequest(body); err != nil {
					b.Fatal(err)
				}
				out := encodeAnswer(&c.ans)
				if err := checkMsgpack(out); err != nil {
					b.Fatal(err)
				}
				if _, err := decodeAnswer(out); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkRepWireMsgpack(b *testing.B) {
	for _, c := range repBench() {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var req Request
				msgpackRoundTrip(b, &c.req, &req)
				var ans Answer
				msgpackRoundTrip(b, &c.ans, &ans)
			}
		})
	}
}
