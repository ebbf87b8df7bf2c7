package bench

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chime-scheduler/chime/slots"
)

// The routes through the Go SDK against two fake nodes (which forward
// nothing): sdk sends each task to its owner from the SDK's slot map,
// sdk-fixed everything to the first node.
func TestRunCreateSDKRoutesAgainstFakeCluster(t *testing.T) {
	f1, f2 := startFakeNode(t, 0, ""), startFakeNode(t, 0, "")
	halfCluster(t, f1, f2)
	cfg := DefaultCreateConfig()
	cfg.Target.URLs = []string{f1.url, f2.url}
	cfg.Mode, cfg.Route, cfg.N, cfg.Concurrency, cfg.SkipBaseline = ModeSingle, RouteSDKCompare, 200, 4, true
	res, err := RunCreate(t.Context(), cfg)
	if err != nil {
		t.Fatalf("RunCreate: %v", err)
	}
	if len(res.Routes) != 2 || res.Routes[0].Route != RouteSDK || res.Routes[1].Route != RouteSDKFixed || res.Create != &res.Routes[0] {
		t.Fatalf("Routes = %+v, want an sdk then an sdk-fixed phase, Create the first", res.Routes)
	}
	for _, cs := range res.Routes {
		if cs.Acked != 200 || cs.Rejected != 0 || cs.Latency.Count != 200 || cs.Forwarded == nil || *cs.Forwarded != 0 {
			t.Errorf("%s phase: acked %d, rejected %d (%q), latencies %d, forwarded %v; want 200, 0, 200 and a count of 0",
				cs.Route, cs.Acked, cs.Rejected, cs.FirstError, cs.Latency.Count, cs.Forwarded)
		}
	}
	// Ids are bc-<run>-s-<i> (sdk) and bc-<run>-sf-<i> (sdk-fixed).
	counts := map[string]int{}
	for k, f := range []*fakeNode{f1, f2} {
		for id := range f.storedIDs() {
			ownedHere := (slots.Of(id) < 8192) == (k == 0)
			switch {
			case strings.Contains(id, "-s-") && !ownedHere:
				t.Errorf("sdk route sent %s (slot %d) to n%d, which does not own it", id, slots.Of(id), k+1)
			case strings.Contains(id, "-sf-") && k != 0:
				t.Errorf("sdk-fixed route sent %s to n%d, want the first node only", id, k+1)
			}
			phase := idTag(RouteSDK)
			if strings.Contains(id, "-sf-") {
				phase = idTag(RouteSDKFixed)
			}
			counts[fmt.Sprintf("n%d/%s", k+1, phase)]++
		}
	}
	if counts["n1/sf"] != 200 || counts["n1/s"] == 0 || counts["n2/s"] == 0 || counts["n1/s"]+counts["n2/s"] != 200 {
		t.Errorf("tasks stored per node/phase = %v, want sdk's 200 over both, sdk-fixed's 200 on n1", counts)
	}
	var md bytes.Buffer
	if err := res.WriteMarkdown(&md); err != nil || !strings.Contains(md.String(), "create single via sdk-fixed") ||
		!strings.Contains(md.String(), "sdk, same run") {
		t.Errorf("markdown (err %v) lacks the sdk-fixed rows next to the sdk ceiling:\n%s", err, md.String())
	}
}

// The SDK retries a create answered 503; when that attempt had stored the
// task, the retry is answered 409, which the harness counts as existing
// on retry because it counted the attempts. A 409 on the first attempt is
// a rejection.
func TestSDKCreatorCountsRetries(t *testing.T) {
	f := startFakeNode(t, 0, "9")
	f.movingSuffix, f.movingStores = "3", true
	f.ids["bt-s-1"] = true // exists before the run: 409 at once
	tg := urlTarget(f.url, 4)
	defer tg.close()
	sc, err := newSDKCreator(tg, RouteSDK, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer sc.close()
	tt := newTaskTemplate("bt-s-", "http://127.0.0.1:9/never", "s")
	results := make([]int, 100) // 1 acked, 2 refused, by index; each from one goroutine
	plan := createPlan{n: 100, batch: 1, concurrency: 2, single: true,
		send: sc.send(tt, time.Hour, func(i int, ok bool) { results[i] = map[bool]int{true: 1, false: 2}[ok] })}
	st, err := createTasks(t.Context(), tg.api, tg, plan, Progress{}.startPhase("create", 100))
	if err != nil {
		t.Fatal(err)
	}
	// Ids ending in 9 are rejected (400), bt-s-1 exists (409 at once);
	// those ending in 3 are answered 503 once, stored all the same, and
	// found stored on the SDK's retry.
	if st.Acked != 89 || st.Rejected != 11 || st.ExistedOnRetry != 10 || st.Retries != 10 {
		t.Errorf("acked %d, rejected %d, existed on retry %d, retries %d; want 89, 11, 10, 10 (first error %q)",
			st.Acked, st.Rejected, st.ExistedOnRetry, st.Retries, st.FirstError)
	}
	if results[1] != 2 || results[3] != 1 || results[9] != 2 || results[0] != 1 {
		t.Errorf("results of 0, 1, 3, 9 = %v, want acked, refused, acked, refused", []int{results[0], results[1], results[3], results[9]})
	}
}
