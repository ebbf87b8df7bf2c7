package node

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/chime-scheduler/chime/node/forward"
	"github.com/chime-scheduler/chime/node/internalauth"
	"github.com/chime-scheduler/chime/node/membership"
	"github.com/chime-scheduler/chime/node/ownership"
	"github.com/chime-scheduler/chime/ring"
	"github.com/chime-scheduler/chime/ring/gossip"
	"github.com/chime-scheduler/chime/slots"
	"github.com/chime-scheduler/chime/storage"
)

// The wiring of the slot-ownership executor (package node/ownership): the
// node's parts behind the small interfaces it takes, and its endpoints.

// newOwnership builds the executor of a cluster node on board b, from the
// slot states, voters and consents persisted in st.
func (n *Node) newOwnership(b *ownership.Board, persisted map[slots.Slot]slots.SlotState, voters []string, consents []storage.Consent,
	wr *writer, st *storage.Store, c *membership.Cluster, snaps ownership.Snapshots) (*ownership.Executor, error) {
	mc := n.cfg.Cluster.ownershipConfig(n.cfg.Name)
	for _, k := range consents {
		mc.Consents = append(mc.Consents, slots.Consent{Owner: k.Owner, Taker: k.Taker, Inc: k.Inc, Term: k.Term})
	}
	cfg := ownership.Config{Machine: mc, SettleTime: n.cfg.Cluster.SettleTime, OverdueAfter: n.cfg.OverdueAfter,
		TraceEvery: max(0, n.cfg.Cluster.TraceSlots), MaxBody: internalauth.MaxCtlBody,
		Beat: n.cfg.Cluster.Gossip.GossipInterval}
	store := ownStore{w: wr, st: st}
	return ownership.New(cfg, persisted, voters, b, ownership.Deps{
		Persister: store,
		Data:      store,
		Snapshots: snaps,
		Sender:    ownSender{fwd: n.fwd, timeout: mc.Settle},
		Clock:     n.cfg.Clock,
		Log:       n.log,
		Gained: func(ss []uint16) {
			n.metrics.Takeovers.Add(float64(len(ss)))
			n.loop.gain(ss)
		},
		Genesis:      c.SetGenesis,
		Stalled:      n.health.NoteStalls,
		RunForgotten: c.Gossip().RunForgotten,
		EarlierRun:   earlierRunIf(len(persisted) == 0, n.earlierRun),
	})
}

// earlierRunIf is f for a node that started with no slot state (only it
// asks), else nil.
func earlierRunIf(empty bool, f func([]gossip.Member) bool) func([]gossip.Member) bool {
	if !empty {
		return nil
	}
	return f
}

// earlierRunWait bounds how long a node that started empty asks its peers
// about an earlier run of its name before its first table.
const earlierRunWait = 2 * time.Second

// earlierRun asks the members up in ms at once whether they saw a run of
// this node's name other than this one (GET /internal/v1/run): yes from
// any of them means this node's name had an earlier run, whose data is not
// here. It waits for every answer (a member that restarted since may not
// know) up to earlierRunWait; no answer (a timeout, a node too old to know
// the route) counts as no, as before the question existed.
func (n *Node) earlierRun(ms []gossip.Member) bool {
	self, ok := n.cluster.Gossip().Local()
	if !ok {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), earlierRunWait)
	defer cancel()
	path := "/internal/v1/run?boot=" + strconv.FormatUint(self.Meta.BootID, 10)
	yes := make(chan string, len(ms))
	var wg sync.WaitGroup
	for _, m := range ms {
		if m.Name == n.cfg.Name || !m.Up() {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := n.fwd.Do(ctx, ring.Member{Name: m.Name, HTTPAddr: m.Meta.HTTPAddr}, http.MethodGet, path, nil, http.Header{}, 0)
			var a runAnswer
			if err == nil && c.Status == http.StatusOK && json.Unmarshal(c.Body, &a) == nil && a.Earlier {
				yes <- m.Name
			}
		}()
	}
	go func() { wg.Wait(); close(yes) }()
	for name := range yes { // the first yes; closed once all answered or the wait ran out
		n.log.Warn("a member saw an earlier run of this node's name", "member", name)
		return true
	}
	return false
}

// runAnswer is GET /internal/v1/run's answer.
type runAnswer struct {
	Earlier bool `json:"earlier"`
}

// handleRun answers a member that started with an empty data dir whether
// this node saw a run of its name other than the one with boot id boot
// (gossip.Membership.EarlierRun): GET /internal/v1/run?boot=N, 200
// {"earlier":bool}. It speaks only of the caller's own name.
func (n *Node) handleRun(w http.ResponseWriter, r *http.Request) {
	from, _, e := n.guard.Read(r, "run", 0)
	if e != nil {
		writeError(w, e)
		return
	}
	boot, err := strconv.ParseUint(r.URL.Query().Get("boot"), 10, 64)
	if err != nil || boot == 0 {
		writeError(w, invalid("boot", "want the caller's boot id, a positive integer"))
		return
	}
	if n.cluster == nil {
		writeError(w, invalid("boot", "a standalone node has no members"))
		return
	}
	writeJSON(w, http.StatusOK, runAnswer{Earlier: n.cluster.Gossip().EarlierRun(from, boot)})
}

// slotStates returns the ownership states among stored slot metas.
func slotStates(metas map[uint16]storage.SlotMeta) map[slots.Slot]slots.SlotState {
	out := make(map[slots.Slot]slots.SlotState, len(metas))
	for s, m := range metas {
		if m.Role == 0 && m.OwnEpoch == 0 && !m.WasOwner {
			continue
		}
		st := slots.SlotState{Role: slots.Role(m.Role), Epoch: slots.Epoch(m.OwnEpoch), Seq: m.OwnSeq, Grantee: m.Grantee,
			Handed: m.Handed, HandedSeq: m.HandedSeq, HandedDropped: m.HandedDropped, HandedBare: m.HandedBare, HandedTook: m.HandedTook, WasOwner: m.WasOwner}
		if m.FinalOf != 0 && m.FinalOf == m.Epoch && m.FinalOf < m.OwnEpoch {
			// Still the data of the epoch we owned (a copy that replaced it
			// since, its Persist lost to a crash, moved Epoch on).
			st.FinalOf = slots.Epoch(m.FinalOf)
		}
		out[slots.Slot(s)] = st
	}
	return out
}

// ownView is what the executor needs of v.
func ownView(v *membership.View) ownership.View {
	return ownership.View{Table: v.Table, Members: v.Members, Changed: v.Changed, Owns: v.Owns}
}

// ownStore is the executor's Persister and SlotData: the writer, and the
// store for the voters.
type ownStore struct {
	w  *writer
	st *storage.Store
}

func (o ownStore) PersistStates(ps []slots.Persist) error { return o.w.persistStates(ps) }
func (o ownStore) SetVoters(vs []string) error            { return o.st.SetVoters(vs) }
func (o ownStore) SetConsents(cs []slots.Consent) error {
	out := make([]storage.Consent, len(cs))
	for i, c := range cs {
		out[i] = storage.Consent{Owner: c.Owner, Taker: c.Taker, Inc: c.Inc, Term: c.Term}
	}
	return o.st.SetConsents(out)
}
func (o ownStore) DropSlots(ss []uint16, gens []uint64) error { return o.w.dropSlots(ss, gens) }
func (o ownStore) IdleSlots(ss []uint16) ([]uint16, error)    { return o.w.sealCheck(ss) }
func (o ownStore) Seq(s uint16) uint64                        { return o.w.repl.position(s).Seq }

// ownSender posts the executor's batches to POST /internal/v1/ctl.
type ownSender struct {
	fwd     *forward.Client
	timeout time.Duration
}

func (o ownSender) Send(to ring.Member, bodies [][]byte) error {
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	for _, body := range bodies {
		if _, err := o.fwd.Post(ctx, to, "/internal/v1/ctl", "application/octet-stream", body); err != nil {
			return err
		}
	}
	return nil
}

// handleCtl receives another node's machine messages.
func (n *Node) handleCtl(w http.ResponseWriter, r *http.Request) {
	from, body, e := n.guard.Read(r, "ctl", internalauth.MaxCtlBody)
	if e != nil {
		writeError(w, e)
		return
	}
	if n.ctl == nil {
		writeError(w, invalid("from", "ctl: not a cluster member"))
		return
	}
	if err := n.ctl.Receive(from, body); errors.Is(err, ownership.ErrSender) {
		writeError(w, invalid("from", "%v", err))
		return
	} else if err != nil {
		writeError(w, invalid("body", "%v", err))
		return
	}
	w.WriteHeader(http.StatusOK)
}

// handleSlotDebug shows the ownership machine's view of one slot.
func (n *Node) handleSlotDebug(w http.ResponseWriter, r *http.Request) {
	if _, _, e := n.guard.Read(r, "slots", 0); e != nil {
		writeError(w, e)
		return
	}
	s, err := strconv.Atoi(r.PathValue("slot"))
	if err != nil || s < 0 || s >= slots.Count || n.ctl == nil {
		writeError(w, invalid("slot", "want a slot number below %d in a cluster", slots.Count))
		return
	}
	if d, ok := n.ctl.Debug(r.Context(), uint16(s)); ok {
		writeJSON(w, http.StatusOK, map[string]any{"node": n.cfg.Name, "slot": s, "machine": d})
	}
}
