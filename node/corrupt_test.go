package node

import (
	"encoding/binary"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/chime-scheduler/chime/node/httpapi"

	"github.com/chime-scheduler/chime/slots"
	"github.com/chime-scheduler/chime/storage"
)

// plantCorrupt writes a task record that does not decode, due now, under
// id, the way a faulty peer's replication (or a flipped disk block under a
// checksum-less path) would leave it: the task key with bytes that are
// not a task, and its due index entry.
func plantCorrupt(t *testing.T, s *storage.Store, id string, due time.Time) {
	t.Helper()
	slot := slots.Of(id)
	key := func(section byte, rest ...byte) []byte {
		return append([]byte{'s', byte(slot >> 8), byte(slot), section}, rest...)
	}
	rec := func(k, v []byte) []byte {
		b := []byte{1} // set
		b = binary.AppendUvarint(b, uint64(len(k)))
		b = append(b, k...)
		b = binary.AppendUvarint(b, uint64(len(v)))
		return append(b, v...)
	}
	wake := binary.BigEndian.AppendUint64(nil, uint64(due.UnixNano()))
	data := append(rec(key('T', []byte(id)...), []byte{0xc1, 0xc1, 0xc1}), rec(key('D', append(wake, id...)...), nil)...)
	b := s.NewBatch()
	if err := b.ApplySlotOps(storage.SlotOps{Slot: slot, Count: 2, Data: data}); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(true); err != nil {
		t.Fatal(err)
	}
}

// A record that does not decode does not take the node down with it:
// listings skip it (and answer the rest), the fire path reads it once and
// quarantines it instead of retrying it every second, and it is counted in
// chime_corrupt_records_total.
func TestCorruptRecordIsSkippedAndQuarantined(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tn := startNode(t, func(c *Config) { c.LoadInterval = 500 * time.Millisecond })
		rcv := newReceiver(t)
		for _, id := range []string{"good-1", "good-2"} {
			if code := tn.do(t, "POST", "/v1/tasks", map[string]any{"id": id, "callback_url": rcv.url("/hook"), "delay_ms": 100}, nil); code != 201 {
				t.Fatalf("create %s = %d", id, code)
			}
		}
		// Planted while the node is down, so the start-up load files it.
		cfg := tn.cfg
		tn.stop(t)
		st, err := storage.Open(storage.Options{Dir: cfg.DataDir})
		if err != nil {
			t.Fatal(err)
		}
		plantCorrupt(t, st, "bad", time.Now())
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
		tn = restartNode(t, cfg)

		var page struct {
			Tasks []httpapi.TaskResponse `json:"tasks"`
		}
		if code := tn.do(t, "GET", "/v1/tasks", nil, &page); code != http.StatusOK || len(page.Tasks) != 2 {
			t.Fatalf("listing with a corrupt record = %d, %d tasks; want 200 with the 2 good ones", code, len(page.Tasks))
		}
		rcv.waitHits(t, 10*time.Second, func(h []hit) bool { return len(h) >= 2 })
		// Several loader rounds (500 ms) later the bad record was read to fire
		// once or twice, not every second of a retry loop.
		time.Sleep(3 * time.Second)
		reads := tn.store.CorruptRecords()
		if reads < 2 || reads > 3 { // the listing, then the fire path once (a loader round may race it once more)
			t.Errorf("the corrupt record was read %d times in 3 s; want it quarantined after its first fire", reads)
		}
		if want := fmt.Sprintf("\nchime_corrupt_records_total %d\n", tn.store.CorruptRecords()); !strings.Contains(tn.metricsText(t), want) {
			t.Errorf("/metrics lacks %q", strings.TrimSpace(want))
		}
	})
}
