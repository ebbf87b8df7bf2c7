package ui

import (
	"bytes"
	"compress/flate"
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"
)

// staticAPI returns the same prebuilt snapshot every time, so a benchmark
// measures the hub's encoding, not the fake's construction.
type staticAPI struct{ v any }

func (s staticAPI) Snapshot(context.Context) (any, error) { return s.v, nil }

// BenchmarkEncode measures what one push costs the node besides taking the
// snapshot: JSON encoding and preparing the websocket message. It reports
// the message size and its size after permessage-deflate-like compression
// (flate level 1, what gorilla uses by default).
//
// table=omitted leaves the slot table (slot_owners, slot_states) out: what
// a push would cost if the hub re-sent the table only when table_version
// changes. The difference is what skipping it could save per push.
func BenchmarkEncode(b *testing.B) {
	for _, members := range []int{1, 5} {
		for _, table := range []string{"sent", "omitted"} {
			b.Run(fmt.Sprintf("members=%d/table=%s", members, table), func(b *testing.B) {
				snap := newFakeSnapshot(members, time.Now())
				if members == 1 {
					snap.Hosts = nil
				}
				if table == "omitted" {
					snap.SlotOwners, snap.SlotStates = nil, nil
				}
				raw, err := json.Marshal(message{Type: "snapshot", Seq: 1, Data: snap})
				if err != nil {
					b.Fatal(err)
				}
				var z bytes.Buffer
				fw, _ := flate.NewWriter(&z, 1)
				fw.Write(raw)
				fw.Close()

				hb := newHub(staticAPI{snap}, DefaultOptions(), discardLogger())
				defer hb.cancel()
				var failed bool
				b.ReportAllocs()
				for b.Loop() {
					hb.encode(1, &failed)
				}
				b.ReportMetric(float64(len(raw)), "B/push")
				b.ReportMetric(float64(z.Len()), "deflateB/push")
			})
		}
	}
}

// BenchmarkDeflate approximates the other per-push cost when browsers
// negotiate permessage-deflate: gorilla compresses a prepared message once
// per push at flate level 1.
func BenchmarkDeflate(b *testing.B) {
	for _, members := range []int{1, 5} {
		b.Run(fmt.Sprintf("members=%d", members), func(b *testing.B) {
			raw, err := json.Marshal(message{Type: "snapshot", Seq: 1, Data: newFakeSnapshot(members, time.Now())})
			if err != nil {
				b.Fatal(err)
			}
			var z bytes.Buffer
			fw, _ := flate.NewWriter(&z, 1)
			b.SetBytes(int64(len(raw)))
			b.ReportAllocs()
			for b.Loop() {
				z.Reset()
				fw.Reset(&z)
				fw.Write(raw)
				fw.Close()
			}
		})
	}
}
