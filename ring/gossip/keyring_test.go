package gossip_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/chime-scheduler/chime/ring/gossip"
)

var newKey = []byte("NEWNEWNEWNEWNEWNEWNEWNEWNEWNEW32")

// TestKeyRotation rotates the gossip key of a live 3-member cluster the way
// `chime cluster keys` does (install everywhere, use everywhere, remove the
// old one everywhere) while a watcher samples every member's view: nobody
// may be suspected or lost at any point. Afterwards the old key no longer
// gets in, the new one does, and a member restarted with the old key in
// its config comes back with the rotated keyring from its file.
func TestKeyRotation(t *testing.T) {
	dir := t.TempDir()
	file := func(i int) string { return filepath.Join(dir, "n"+string(rune('1'+i)), "keyring.json") }
	for i := range 4 {
		if err := os.MkdirAll(filepath.Dir(file(i)), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	synctest.Test(t, func(t *testing.T) {
		withKeys := func(i int, cfg *gossip.Config) {
			cfg.SecretKey = testKey
			cfg.KeyringFile = file(i)
		}
		c := newCluster(t, 3, withKeys)
		c.joinAll()
		waitFor(t, "all alive", 10*time.Second, c.allAlive)

		var mu sync.Mutex
		var bad []string
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				case <-time.After(100 * time.Millisecond):
				}
				for _, nd := range c.nodes {
					if s := nd.m.Stats(); s.Alive != len(c.nodes) {
						mu.Lock()
						bad = append(bad, nd.name)
						mu.Unlock()
					}
				}
			}
		})
		step := func(what string, op func(*gossip.Membership) error) {
			t.Helper()
			for _, nd := range c.nodes {
				if err := op(nd.m); err != nil {
					t.Fatalf("%s on %s: %v", what, nd.name, err)
				}
				time.Sleep(2 * time.Second) // members differ for a while
			}
			time.Sleep(10 * time.Second) // probes, gossip and a push/pull or two
		}
		step("install", func(m *gossip.Membership) error { return m.InstallKey(newKey) })
		step("use", func(m *gossip.Membership) error { return m.UseKey(newKey) })
		step("remove", func(m *gossip.Membership) error { return m.RemoveKey(testKey) })
		close(stop)
		wg.Wait()
		if len(bad) > 0 {
			t.Errorf("members saw fewer than 3 alive during the rotation, %d times (%v…)", len(bad), bad[0])
		}
		for _, nd := range c.nodes {
			k, err := nd.m.Keys()
			if err != nil || !bytes.Equal(k.Primary, newKey) || len(k.All) != 1 {
				t.Errorf("%s keys = %x, %v; want only the new key", nd.name, k, err)
			}
		}

		// The old key is out; the new one is in.
		old := c.start(3, func(_ int, cfg *gossip.Config) { cfg.SecretKey = testKey })
		if n, err := old.m.Join([]string{c.nodes[0].addr}); n != 0 || err == nil {
			t.Errorf("Join with the removed key = %d, %v; want refused", n, err)
		}
		if err := old.m.Close(); err != nil {
			t.Error(err)
		}

		// n3 restarts with the old key in its config: its file wins.
		if err := c.nodes[2].m.Close(); err != nil {
			t.Fatal(err)
		}
		c.nodes[2] = c.start(2, withKeys)
		if k, err := c.nodes[2].m.Keys(); err != nil || !bytes.Equal(k.Primary, newKey) {
			t.Fatalf("restarted n3 keys = %x, %v; want the file's", k, err)
		}
		if n, err := c.nodes[2].m.Join([]string{c.nodes[0].addr}); n != 1 || err != nil {
			t.Errorf("restarted n3 Join = %d, %v; want 1", n, err)
		}
		c.close()
	})
	info, err := os.Stat(file(0))
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("keyring file: %v, %v; want mode 0600", info, err)
	}
}

func TestKeyringErrors(t *testing.T) {
	dir := t.TempDir()
	newMember := func(key []byte, file string) (*gossip.Membership, error) {
		cfg := gossip.DefaultLocalConfig()
		cfg.Name, cfg.SecretKey, cfg.KeyringFile = "n1", key, file
		return gossip.New(cfg)
	}
	open, err := newMember(nil, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := open.Keys(); !errors.Is(err, gossip.ErrNoEncryption) {
		t.Errorf("Keys without encryption = %v", err)
	}
	if err := open.InstallKey(newKey); !errors.Is(err, gossip.ErrNoEncryption) {
		t.Errorf("InstallKey without encryption = %v", err)
	}

	file := filepath.Join(dir, "keyring.json")
	m, err := newMember(testKey, file)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.UseKey(newKey); !errors.Is(err, gossip.ErrKeyNotInstalled) {
		t.Errorf("UseKey(not installed) = %v", err)
	}
	if err := m.RemoveKey(testKey); !errors.Is(err, gossip.ErrPrimaryKey) {
		t.Errorf("RemoveKey(primary) = %v", err)
	}
	if err := m.InstallKey([]byte("short")); err == nil {
		t.Error("InstallKey(5 bytes) = nil")
	}
	if _, err := os.Stat(file); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("refused changes wrote the keyring file: %v", err)
	}
	for _, op := range []func([]byte) error{m.InstallKey, m.InstallKey, m.UseKey, m.RemoveKey, m.RemoveKey} {
		if err := op(newKey); err != nil && !errors.Is(err, gossip.ErrPrimaryKey) {
			t.Errorf("op = %v", err)
		}
	}
	if err := m.RemoveKey(testKey); err != nil {
		t.Errorf("RemoveKey(old) = %v", err)
	}
	again, err := newMember(nil, file)
	if err != nil {
		t.Fatal(err)
	}
	if k, err := again.Keys(); err != nil || !bytes.Equal(k.Primary, newKey) || len(k.All) != 1 {
		t.Errorf("keys from the file = %x, %v", k, err)
	}

	for _, bad := range []string{"{", `{"primary":"c2hvcnQ="}`, `{"primary":"` + "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=" + `","keys":["!"]}`} {
		if err := os.WriteFile(file, []byte(bad), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := newMember(testKey, file); err == nil {
			t.Errorf("New with keyring file %q = nil error", bad)
		}
	}
	if fp := gossip.KeyFingerprint(testKey); len(fp) != 16 || fp == gossip.KeyFingerprint(newKey) {
		t.Errorf("fingerprints %q %q", fp, gossip.KeyFingerprint(newKey))
	}
}
