package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chime-scheduler/chime/ring/gossip"
)

// TestGossipKeyRotation rotates the gossip key of a live 3-process cluster
// with `chime cluster keys` (install the new key, use it, remove the old
// one, each asked of a different node) while a watcher polls every node's
// view: no member may be seen other than alive and active, and no node may
// log a suspicion or a packet it could not decrypt. A node restarted
// afterwards with the old key in its environment rejoins with the rotated
// keyring it kept in its data directory.
func TestGossipKeyRotation(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	procs := startCluster(t, 3)
	raw := make([]byte, 32)
	_, _ = rand.Read(raw)
	newKey := base64.StdEncoding.EncodeToString(raw)
	oldRaw, _ := gossip.ParseSecretKey(testGossipKey)
	oldFP, newFP := gossip.KeyFingerprint(oldRaw), gossip.KeyFingerprint(raw)

	keys := func(p *chimeProc, args ...string) (keysView, string, error) {
		var out, errb bytes.Buffer
		env := func(string) string { return "" }
		err := runCluster(context.Background(), append(append([]string{"keys"}, args...), "--addr", p.url, "--json"), &out, &errb, env)
		var v keysView
		if err == nil {
			if jerr := json.Unmarshal(out.Bytes(), &v); jerr != nil {
				t.Fatalf("keys %v: %v in %q", args, jerr, out.String())
			}
		}
		return v, out.String() + errb.String(), err
	}
	expect := func(v keysView, want map[string][2]int) {
		t.Helper()
		got := map[string][2]int{}
		for _, k := range v.Keys {
			got[k.Fingerprint] = [2]int{k.Installed, k.Primary}
		}
		if v.Answered != 3 || v.Members != 3 || len(v.Failed) > 0 || len(v.Down) > 0 || fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("keys answer %+v; want 3 of 3 members answering, keys (installed, primary) %v", v, want)
		}
	}

	v, _, err := keys(procs[0], "list")
	if err != nil {
		t.Fatal(err)
	}
	expect(v, map[string][2]int{oldFP: {3, 3}})

	var mu sync.Mutex
	var seen []string
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			for _, p := range procs {
				cv, err := getCluster(p.url)
				mu.Lock()
				if err != nil {
					seen = append(seen, fmt.Sprintf("%s: %v", p.url, err))
				}
				for _, m := range cv.Members {
					if m.Status != "alive" || m.State != "active" {
						seen = append(seen, fmt.Sprintf("%s sees %s %s/%s", cv.Self, m.Name, m.Status, m.State))
					}
				}
				mu.Unlock()
			}
		}
	})
	// Each step is followed by a few probe rounds and gossip.
	settle := func() { time.Sleep(3 * time.Second) }

	v, _, err = keys(procs[0], "install", newKey)
	if err != nil {
		t.Fatal(err)
	}
	expect(v, map[string][2]int{oldFP: {3, 3}, newFP: {3, 0}})
	settle()
	if _, out, err := keys(procs[1], "remove", testGossipKey); err == nil || !strings.Contains(out+err.Error(), "still uses this key") {
		t.Errorf("remove of the key in use: %v %q; want refused", err, out)
	}
	stray := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 32))
	if _, out, err := keys(procs[1], "use", stray); err == nil || !strings.Contains(out+err.Error(), "has not installed this key") {
		t.Errorf("use of a key nobody has: %v %q; want refused", err, out)
	}
	v, _, err = keys(procs[1], "use", newKey)
	if err != nil {
		t.Fatal(err)
	}
	expect(v, map[string][2]int{oldFP: {3, 0}, newFP: {3, 3}})
	settle()
	v, _, err = keys(procs[2], "remove", testGossipKey)
	if err != nil {
		t.Fatal(err)
	}
	expect(v, map[string][2]int{newFP: {3, 3}})
	settle()
	close(stop)
	wg.Wait()
	if len(seen) > 0 {
		t.Errorf("during the rotation a member was not alive and active %d times, first: %s", len(seen), seen[0])
	}
	for _, p := range procs {
		for _, bad := range []string{"Suspect", "decrypt", "Failed to"} {
			if strings.Contains(p.log(), bad) {
				t.Errorf("%s logged %q during the rotation", p.url, bad)
			}
		}
	}

	// n3 restarts with the old key in its environment: the keyring file in
	// its data directory wins, and it rejoins.
	victim := procs[2]
	victim.signal(t, syscall.SIGTERM)
	procs[2] = victim.restart(t)
	if !strings.Contains(procs[2].log(), "not in the keyring file") {
		t.Errorf("the restarted node did not log that it ignored the old key:\n%s", procs[2].log())
	}
	deadline := time.Now().Add(30 * time.Second)
	for why := clusterAgreement(procs); why != ""; why = clusterAgreement(procs) {
		if time.Now().After(deadline) {
			t.Fatalf("the restarted node did not rejoin in 30 s: %s", why)
		}
		time.Sleep(100 * time.Millisecond)
	}
	v, _, err = keys(procs[2], "list")
	if err != nil {
		t.Fatal(err)
	}
	expect(v, map[string][2]int{newFP: {3, 3}})
}
