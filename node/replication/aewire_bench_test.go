package replication

import (
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

// The anti-entropy hot path: a tick's request of 1024 items encoded by the
// owner and decoded by the replica, and the answer back. BenchmarkAEWire
// runs the hand-written codec (aewire.go); BenchmarkAEWireMsgpack the same
// messages in msgpack as the replication requests travel, with the
// checkMsgpack guard a body from a peer needs before msgpack.Unmarshal.
// The hand-written codec stays only while it is at least twice as fast.

func aeBenchRequest() *aeRequest {
	req := &aeRequest{From: "node-7", Version: 1, Items: make([]Item, 1024)}
	for i := range req.Items {
		req.Items[i] = Item{Slot: uint16(i * 16), Epoch: 3, Seq: uint64(1000 + i), Sum: 0x9e3779b97f4a7c15 * uint64(i+1), Count: uint64(50 + i%7)}
	}
	return req
}

func aeBenchAnswer() *aeAnswer {
	a := &aeAnswer{Results: make([]uint8, 1024), Epochs: make([]uint64, 1024)}
	for i := range a.Results {
		a.Results[i], a.Epochs[i] = Match, 3
	}
	return a
}

func BenchmarkAEWire(b *testing.B) {
	req, ans := aeBenchRequest(), aeBenchAnswer()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := decodeAERequest(encodeAERequest(req)); err != nil {
			b.Fatal(err)
		}
		if _, err := decodeAEAnswer(encodeAEAnswer(ans)); err != nil {
			b.Fatal(err)
		}
	}
}

type mpItem struct {
	Slot     uint16 `msgpack:"s"`
	Epoch    uint64 `msgpack:"e"`
	Seq      uint64 `msgpack:"q"`
	HasAlt   bool   `msgpack:"h,omitempty"`
	AltEpoch uint64 `msgpack:"a,omitempty"`
	Sum      uint64 `msgpack:"u"`
	Count    uint64 `msgpack:"n"`
}

type mpRequest struct {
	From    string   `msgpack:"f"`
	Version byte     `msgpack:"v"`
	Items   []mpItem `msgpack:"i"`
}

type mpAnswer struct {
	Results []uint8  `msgpack:"r"`
	Epochs  []uint64 `msgpack:"e"`
}

func BenchmarkAEWireMsgpack(b *testing.B) {
	r := aeBenchRequest()
	req := &mpRequest{From: r.From, Version: r.Version, Items: make([]mpItem, len(r.Items))}
	for i, it := range r.Items {
		req.Items[i] = mpItem(it)
	}
	a := aeBenchAnswer()
	ans := &mpAnswer{Results: a.Results, Epochs: a.Epochs}
	b.ReportAllocs()
	for b.Loop() {
		var gotReq mpRequest
		msgpackRoundTrip(b, req, &gotReq)
		var gotAns mpAnswer
		msgpackRoundTrip(b, ans, &gotAns)
	}
}

// msgpackRoundTrip encodes in with msgpack's reflection, guards the body
// as a peer's is guarded and decodes it into out.
func msgpackRoundTrip(b *testing.B, in, out any) {
	body, err := msgpack.Marshal(in)
	if err != nil {
		b.Fatal(err)
	}
	if err := checkMsgpack(body); err != nil {
		b.Fatal(err)
	}
	if err := msgpack.Unmarshal(body, out); err != nil {
		b.Fatal(err)
	}
}
