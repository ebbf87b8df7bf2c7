package node

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chime-scheduler/chime/storage"
	"github.com/vmihailenco/msgpack/v5"
)

// Fuzz targets for what other programs send a node (issue 11): none may
// panic, and none may accept what it should refuse.

// FuzzCallAuth: signature headers from anyone. Without the secret no

// combination is accepted; a call signed for this node is accepted once.

func FuzzCallAuth(f *testing.F) {
	secret := []byte("0123456789abcdef0123456789abcdef")
	now := time.Unix(1_800_000_000, 0)
	// One genuine call, with a fixed nonce: fuzz workers are separate
	// processes, and each must know the same one.
	sum := sha256.Sum256([]byte("x"))
	g := signed{ts: strconv.FormatInt(now.UnixMilli(), 10), from: "n1", to: "n2", nonce: strings.Repeat("ab", 16), sum: hex.EncodeToString(sum[:])}
	good := httptest.NewRequest("POST", "/internal/v1/ctl", strings.NewReader("x"))
	good.Header.Set(hdrNonce, g.nonce)
	good.Header.Set(hdrBodySum, g.sum)
	good.Header.Set(hdrAuth, g.ts+":"+hex.EncodeToString(callMAC(secret, "POST", "/internal/v1/ctl", g, 1)))
	f.Add(good.Header.Get(hdrAuth), "n1", "n2", good.Header.Get(hdrNonce), good.Header.Get(hdrBodySum), int64(1))
	f.Add("", "", "", "", "", int64(-1))
	f.Add("1800000000000:00", "n1", "n2", strings.Repeat("0", 32), strings.Repeat("0", 64), int64(1<<40))
	f.Fuzz(func(t *testing.T, auth, from, to, nonce, sum string, length int64) {
		r := httptest.NewRequest("POST", "/internal/v1/ctl", nil)
		for k, v := range map[string]string{hdrAuth: auth, hdrFrom: from, hdrTo: to, hdrNonce: nonce, hdrBodySum: sum} {
			r.Header[http.CanonicalHeaderKey(k)] = []string{v}
		}
		r.ContentLength = length
		recv := &callAuth{self: "n2", secret: secret}
		_, reason := recv.check(r, 1<<20, now, func(string) bool { return true })
		genuine := auth == good.Header.Get(hdrAuth) && from == "n1" && to == "n2" && nonce == good.Header.Get(hdrNonce) &&
			sum == good.Header.Get(hdrBodySum) && length == 1
		if reason == "" && !genuine {
			t.Fatalf("accepted a forged call: auth %q from %q to %q nonce %q sum %q length %d", auth, from, to, nonce, sum, length)
		}
	})
}

// FuzzReplicate: a replication request as a peer sends it, decoded and

// applied to a store in memory, as handleReplicate's writer would.

func FuzzReplicate(f *testing.F) {
	st, err := storage.Open(storage.Options{InMemory: true})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { st.Close() })
	ok, _ := msgpack.Marshal(replRequest{From: "n1", Msgs: []replMsg{{Slot: 7, Epoch: 1, Seq: 1, Count: 0}}})
	f.Add(ok)
	bad, _ := msgpack.Marshal(replRequest{From: "x", Msgs: []replMsg{{Slot: 7, Epoch: 1 << 40, Seq: 1, Reset: true, Count: -1}}})
	f.Add(bad)
	f.Add([]byte{0x82, 0xa1, 'f', 0xa1, 'x', 0xa1, 'm', 0xdd, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, body []byte) {
		var req replRequest
		if checkMsgpack(body) != nil || msgpack.Unmarshal(body, &req) != nil {
			return
		}
		for _, m := range req.Msgs {
			b := st.NewBatch()
			if err := b.ApplySlotOps(m.ops()); err != nil {
				b.Close()
				continue
			}
			if err := b.Commit(false); err != nil {
				t.Fatalf("accepted ops did not commit: %v", err)
			}
		}
	})
}

// FuzzBatchEnvelope: the body of POST /v1/tasks:batch.

// FuzzListCursor: a list cursor from a client decodes to a valid position

// or is refused, and a decoded one encodes back to itself.

// TestCheckMsgpack: well-formed values pass, whatever msgpack encodes;

// lengths beyond the bytes left, truncations, trailing bytes and deep

// nesting fail.

func TestCheckMsgpack(t *testing.T) {
	for _, v := range []any{
		nil, true, 1, -1, 1 << 40, -(1 << 40), 1.5, float32(2.5), "s", strings.Repeat("x", 70000), []byte("b"),
		map[string]any{"a": []any{1, "x", nil, map[string]int{"k": 3}}}, make([]int, 70000),
		replRequest{From: "n1", Msgs: []replMsg{{Slot: 7, Epoch: 1, Count: 2, Data: []byte{1, 2, 3}}}},
		replAnswer{Results: []uint8{1, 2}, Epochs: []uint64{1, 1 << 50}},
		time.Unix(1_800_000_000, 5),
	} {
		b, err := msgpack.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if err := checkMsgpack(b); err != nil {
			t.Errorf("%T %.40v: %v", v, v, err)
		}
		for i := range len(b) {
			if checkMsgpack(b[:i]) == nil {
				t.Errorf("%T truncated to %d of %d bytes passes", v, i, len(b))
			}
		}
		if checkMsgpack(append(b, 0)) == nil {
			t.Errorf("%T with a trailing byte passes", v)
		}
	}
	for _, b := range [][]byte{
		{0x82, 0xa1, 'f', 0xa1, 'x', 0xa1, 'm', 0xdd, 0xff, 0xff, 0xff, 0xff}, // 4 billion messages
		{0xdf, 0x7f, 0xff, 0xff, 0xff},                                        // 2 billion map entries
		{0xc6, 0xff, 0xff, 0xff, 0xff, 1},                                     // a 4 GiB bin
		{0xc1},
		append(bytes.Repeat([]byte{0x91}, 40), 0xc0), // nested 40 deep
	} {
		if checkMsgpack(b) == nil {
			t.Errorf("% x passes", b)
		}
	}
}
