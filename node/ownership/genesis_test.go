package ownership

import (
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/chime-scheduler/chime/node/clock"
	"github.com/chime-scheduler/chime/ring"
	"github.com/chime-scheduler/chime/ring/gossip"
	"github.com/chime-scheduler/chime/slots"
)

// genesisExec is an executor stepped by hand (no Run), whose messages and
// genesis reports are recorded.
type genesisExec struct {
	t *testing.T
	e *Executor
	b *Board

	mu      sync.Mutex
	sent    map[string][]Msg // by receiver
	genesis []uint64         // Deps.Genesis calls
}

func newGenesisExec(t *testing.T, self string) *genesisExec {
	g := &genesisExec{t: t, b: NewBoard(), sent: map[string][]Msg{}}
	cfg := Config{Machine: slots.DefaultLocalConfig(self), SettleTime: time.Second, MaxBody: 1 << 20}
	e, err := New(cfg, nil, nil, g.b, Deps{
		Persister: nopStore{},
		Data:      nopStore{},
		Snapshots: nopStore{},
		Sender:    g,
		Clock:     clock.Real,
		Log:       slog.New(slog.NewTextHandler(io.Discard, nil)),
		Gained:    func([]uint16) {},
		Genesis: func(sum uint64) {
			g.mu.Lock()
			defer g.mu.Unlock()
			g.genesis = append(g.genesis, sum)
		},
		Stalled: func(*StallReport) {},
	})
	if err != nil {
		t.Fatal(err)
	}
	g.e = e
	// Hand-stepped: nothing runs Run, whose end stops the couriers.
	t.Cleanup(func() { e.dismissCouriers(nil) })
	return g
}

// Send records what the executor sends (Sender).
func (g *genesisExec) Send(to ring.Member, bodies [][]byte) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, body := range bodies {
		b, err := DecodeBatch(body)
		if err != nil {
			g.t.Errorf("the executor sent a malformed batch: %v", err)
		}
		g.sent[to.Name] = append(g.sent[to.Name], b.Msgs...)
	}
	return nil
}

// step steps the executor once and waits for what it started.
func (g *genesisExec) step() {
	g.e.step(false)
	synctest.Wait()
	g.e.step(false) // the sends' completions
	synctest.Wait()
}

// tick gives the executor a Tick with the table re-checked (as pingIdle
// does for a fresh node), and waits for what it started.
func (g *genesisExec) tick() {
	g.e.tablePending = true
	g.e.step(true)
	synctest.Wait()
}

// tell delivers a GenesisTable from node from.
func (g *genesisExec) tell(from string, sum uint64, names ...string) {
	g.t.Helper()
	if err := g.b.Receive(from, Batch{From: from, Msgs: []Msg{&GenesisTable{Sum: sum, Names: names}}}.Encode()); err != nil {
		g.t.Fatal(err)
	}
	g.step()
}

// asks returns the GenesisAsks sent to node to so far.
func (g *genesisExec) asks(to string) []uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []uint64
	for _, m := range g.sent[to] {
		if a, ok := m.(*GenesisAsk); ok {
			out = append(out, a.Sum)
		}
	}
	return out
}

func (g *genesisExec) genesisCalls() []uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.genesis)
}

// owned counts the slots published as owned at epoch 1.
func (g *genesisExec) owned() int {
	n := 0
	for s := range uint16(slots.Count) {
		if r, e, _ := g.b.State(s); r == slots.RoleOwner && e == 1 {
			n++
		}
	}
	return n
}

type nopStore struct{}

func (nopStore) PersistStates([]slots.Persist) error     { return nil }
func (nopStore) SetVoters([]string) error                { return nil }
func (nopStore) SetConsents([]slots.Consent) error       { return nil }
func (nopStore) DropSlots([]uint16, []uint64) error      { return nil }
func (nopStore) IdleSlots(ss []uint16) ([]uint16, error) { return ss, nil }
func (nopStore) Seq(uint16) uint64                       { return 0 }
func (nopStore) SendSnapshot(slots.SendSnapshot)         {}
func (nopStore) FollowerReady()                          {}
func tableOf(names ...string) ring.Table                 { return ring.Assign(ringMembers(names), slots.Count) }
func ringMembers(names []string) (out []ring.Member) {
	for _, n := range names {
		out = append(out, ring.Member{Name: n})
	}
	return out
}

// member is an alive member; genesis 0 and fresh describe its meta.
func member(name string, state gossip.State, fresh bool, genesis uint64) gossip.Member {
	return gossip.Member{Name: name, Status: gossip.StatusAlive,
		Meta: gossip.Meta{HTTPAddr: name + ":8080", State: state, Fresh: fresh, Genesis: genesis}}
}

// view is the view of members whose table holds the active ones, changed
// at changed.
func view(changed time.Time, ms ...gossip.Member) View {
	var active []string
	for _, m := range ms {
		if m.Meta.State == gossip.StateActive {
			active = append(active, m.Name)
		}
	}
	return View{Table: tableOf(active...), Members: ms, Changed: changed, Owns: func(uint16) bool { return false }}
}

// TestGenesisStraggler: a fresh node whose table is not the one the
// cluster started with (a member advertises another Genesis) asks that
// member for its members, and bootstraps with that table if it is in it;
// it joins if it is not, if the answer does not match the checksum, or if
// no answer comes within genesisPatience. A fresh node whose own table a
// member started with bootstraps at once, settled or not; one not in its
// own table does not bootstrap.
func TestGenesisStraggler(t *testing.T) {
	active := gossip.StateActive
	first := tableOf("n1", "n2")
	firstOwned := 0 // n2's slots in the first table
	for s := range uint16(slots.Count) {
		if o, _ := first.Owner(s); o.Name == "n2" {
			firstOwned++
		}
	}

	// straggler is n2, fresh, seeing n1 started with the first table and
	// n3 (fresh) active: a table of three.
	straggler := func(t *testing.T) *genesisExec {
		g := newGenesisExec(t, "n2")
		v := view(time.Now(), member("n1", active, false, first.Checksum()), member("n2", active, true, 0), member("n3", active, true, 0))
		g.b.ViewChanged(View{}, v)
		g.step()
		return g
	}

	t.Run("in the first table", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			g := straggler(t)
			if got := g.asks("n1"); !slices.Equal(got, []uint64{first.Checksum()}) {
				t.Fatalf("asked n1 for %x, want the first table %x", got, first.Checksum())
			}
			if n := g.owned(); n != 0 || len(g.genesisCalls()) != 0 {
				t.Fatalf("before the answer: %d slots owned, genesis %v", n, g.genesisCalls())
			}
			time.Sleep(100 * time.Millisecond)
			g.step()
			if got := g.asks("n1"); len(got) != 1 {
				t.Errorf("asked again within a lease: %x", got)
			}
			g.tell("n1", first.Checksum(), "n1", "n2")
			// It took its slots of the first table at epoch 1; those the
			// current table gives n3 it hands over (as on a join).
			now := tableOf("n1", "n2", "n3")
			kept, moving := 0, 0
			for s := range uint16(slots.Count) {
				o1, _ := first.Owner(s)
				if o1.Name != "n2" {
					continue
				}
				r, e, _ := g.b.State(s)
				if e != 1 {
					t.Fatalf("slot %d of n2 in the first table: epoch %d, want 1", s, e)
				}
				if o, _ := now.Owner(s); o.Name == "n2" {
					kept++
					if r != slots.RoleOwner {
						t.Fatalf("slot %d, n2's in both tables: role %v, want owner", s, r)
					}
				} else {
					moving++
				}
			}
			if kept == 0 || moving == 0 || kept+moving != firstOwned {
				t.Errorf("n2 kept %d and moves %d of its %d slots of the first table", kept, moving, firstOwned)
			}
			if got := g.genesisCalls(); !slices.Equal(got, []uint64{first.Checksum()}) {
				t.Errorf("advertised genesis %x, want the first table's %x", got, first.Checksum())
			}
			// It answers for that table now.
			if err := g.b.Receive("n3", Batch{From: "n3", Msgs: []Msg{&GenesisAsk{Sum: first.Checksum()}}}.Encode()); err != nil {
				t.Fatal(err)
			}
			g.step()
			g.mu.Lock()
			answered := slices.ContainsFunc(g.sent["n3"], func(m Msg) bool {
				gt, ok := m.(*GenesisTable)
				return ok && gt.Sum == first.Checksum() && slices.Equal(gt.Names, []string{"n1", "n2"})
			})
			g.mu.Unlock()
			if !answered {
				t.Error("no GenesisTable sent to n3 for the table n2 bootstrapped with")
			}
		})
	})

	t.Run("not in it", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			g := newGenesisExec(t, "n3")
			v := view(time.Now(), member("n1", active, false, first.Checksum()), member("n2", active, false, first.Checksum()), member("n3", active, true, 0))
			g.b.ViewChanged(View{}, v)
			g.step()
			if len(g.asks("n1"))+len(g.asks("n2")) != 1 {
				t.Fatalf("asks: n1 %x, n2 %x; want one", g.asks("n1"), g.asks("n2"))
			}
			from := "n1"
			if len(g.asks("n2")) == 1 {
				from = "n2"
			}
			g.tell(from, first.Checksum(), "n1", "n2")
			time.Sleep(2 * time.Second)
			g.tick()
			if n := g.owned(); n != 0 {
				t.Errorf("n3, not in the first table, owns %d slots at epoch 1", n)
			}
			if got := g.genesisCalls(); slices.ContainsFunc(got, func(s uint64) bool { return s != 0 }) {
				t.Errorf("n3 advertised genesis %x, want none", got)
			}
			if len(g.asks("n1"))+len(g.asks("n2")) != 1 {
				t.Errorf("asked again after the answer: n1 %x, n2 %x", g.asks("n1"), g.asks("n2"))
			}
		})
	})

	t.Run("a wrong answer, then none", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			g := straggler(t)
			// Members that do not give the checksum are ignored, and so
			// is an answer from a node it did not ask.
			g.tell("n1", first.Checksum(), "n2", "n3")
			g.tell("n3", first.Checksum(), "n1", "n2")
			if n := g.owned(); n != 0 || !g.e.fresh {
				t.Fatalf("after a wrong answer: %d slots owned, fresh %v", n, g.e.fresh)
			}
			time.Sleep(genesisPatience / 2)
			g.tick()
			if len(g.asks("n1")) < 2 || !g.e.fresh {
				t.Fatalf("within its patience: asked %d times, fresh %v; want it asking again, fresh", len(g.asks("n1")), g.e.fresh)
			}
			time.Sleep(genesisPatience / 2)
			g.tick()
			if g.e.fresh || g.owned() != 0 {
				t.Errorf("after its patience: fresh %v, %d slots owned at epoch 1; want joined, none", g.e.fresh, g.owned())
			}
		})
	})

	t.Run("a member started with this table", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			g := newGenesisExec(t, "n2")
			v := view(time.Now(), member("n1", active, false, first.Checksum()), member("n2", active, true, 0))
			g.b.ViewChanged(View{}, v) // not settled: changed now
			g.step()
			if n := g.owned(); n != firstOwned {
				t.Errorf("owns %d slots at epoch 1 at once, want its %d of the table n1 started with", n, firstOwned)
			}
			if len(g.asks("n1")) != 0 {
				t.Errorf("asked n1 for its table: %x", g.asks("n1"))
			}
		})
	})

	t.Run("a brand-new cluster waits to settle", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			g := newGenesisExec(t, "n2")
			v := view(time.Now(), member("n1", active, true, 0), member("n2", active, true, 0))
			g.b.ViewChanged(View{}, v)
			g.step()
			if n := g.owned(); n != 0 {
				t.Fatalf("owns %d slots before its view settled", n)
			}
			time.Sleep(time.Second)
			g.tick()
			if n := g.owned(); n != firstOwned {
				t.Errorf("owns %d slots once settled, want %d", n, firstOwned)
			}
		})
	})

	t.Run("not in its own table", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			g := newGenesisExec(t, "n3")
			v := view(time.Now().Add(-time.Minute), member("n1", active, false, first.Checksum()), member("n2", active, false, first.Checksum()),
				member("n3", gossip.StateJoining, true, 0))
			g.b.ViewChanged(View{}, v)
			g.step()
			if got := g.genesisCalls(); slices.ContainsFunc(got, func(s uint64) bool { return s != 0 }) || g.owned() != 0 {
				t.Errorf("a joining node bootstrapped: genesis %x, %d slots owned", got, g.owned())
			}
		})
	})
}

// TestTableSumFollowsTheMachine: the board says which table its counts
// are for (TableSum) only once the machine has been given it, so a node
// whose view already holds a new table does not read the old table's
// counts as the new one's (Node.Ready: a joiner owning nothing yet read as
// ready while its machine worked through its first step).
func TestTableSumFollowsTheMachine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		active := gossip.StateActive
		g := newGenesisExec(t, "n2")
		if g.b.TableSum() != 0 {
			t.Fatalf("TableSum %x before any table", g.b.TableSum())
		}
		v1 := view(time.Now(), member("n1", active, false, 0), member("n2", active, false, 0))
		g.b.ViewChanged(View{}, v1)
		if g.b.TableSum() != 0 {
			t.Errorf("TableSum %x before the machine took the view in", g.b.TableSum())
		}
		time.Sleep(2 * time.Second) // settled
		g.tick()
		g.step()
		if got, want := g.b.TableSum(), v1.Table.Checksum(); got != want {
			t.Fatalf("TableSum %x after the step, want the view's table %x", got, want)
		}
		v2 := view(time.Now(), member("n1", active, false, 0), member("n2", active, false, 0), member("n3", active, false, 0))
		g.b.ViewChanged(v1, v2)
		if got, want := g.b.TableSum(), v1.Table.Checksum(); got != want {
			t.Errorf("TableSum %x before the machine took the new view in, want the old table's %x", got, want)
		}
		time.Sleep(2 * time.Second)
		g.tick()
		g.step()
		if got, want := g.b.TableSum(), v2.Table.Checksum(); got != want {
			t.Errorf("TableSum %x after the step, want the new table's %x", got, want)
		}
	})
}
