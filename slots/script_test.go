package slots

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

var rewrite = flag.Bool("rewrite", false, "rewrite testdata/*.txt with the actual output")

// TestScripts runs the script-style golden tests in testdata/*.txt
// (R35). A script is a list of blocks separated by blank lines:
//
//	command args...
//	input lines (optional)
//	----
//	expected output
//
// Lines starting with # between blocks are comments. The commands drive a
// cluster of Machines (see runCommand); the output is every effect the
// command caused, as "node: Effect", or "ok". Run with -rewrite to update
// the expected output. Reference: DESIGN §4.
func TestScripts(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts: %v", err)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txt"), func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			got := runScript(t, string(data))
			if *rewrite {
				if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			if got != string(data) {
				t.Errorf("%s differs; rerun with -rewrite and inspect the diff.\ngot:\n%s", file, got)
			}
		})
	}
}

// runScript executes the script and returns it with actual outputs.
func runScript(t *testing.T, script string) string {
	t.Helper()
	c := newCluster(t, 4)
	// The scripts show the lease, grants and moves step by step without
	// the exclusive vote (its messages would double every trace); its
	// tests are vote_test.go's and the simulations', which run with it.
	c.vote = false
	var out strings.Builder
	lines := strings.Split(strings.TrimRight(script, "\n"), "\n")
	for i := 0; i < len(lines); {
		line := lines[i]
		if line == "" || strings.HasPrefix(line, "#") {
			out.WriteString(line + "\n")
			i++
			continue
		}
		cmd := line
		i++
		var input []string
		for i < len(lines) && lines[i] != "----" {
			input = append(input, lines[i])
			i++
		}
		i++ // ----
		for i < len(lines) && lines[i] != "" {
			i++ // old expected output
		}
		var log strings.Builder
		c.out = &log
		if err := runCommand(c, cmd, input); err != nil {
			t.Fatalf("%q: %v", cmd, err)
		}
		res := log.String()
		if res == "" {
			res = "ok\n"
		}
		out.WriteString(cmd + "\n")
		for _, in := range input {
			out.WriteString(in + "\n")
		}
		out.WriteString("----\n" + res)
	}
	return out.String()
}

// runCommand runs one script command:
//
//	new n1 n2 ... [slots=N]   create fresh nodes; input "n1: <states>" gives
//	                          persisted state (ParseStates notation)
//	table [bootstrap]         every live node gets the table of its view
//	dead                      every live node hears MemberDead for the nodes
//	                          it cannot reach
//	tick 2.5s                 Tick every 100 ms up to base+2.5s to every
//	                          live node (and signs of life between members)
//	deliver                   deliver queued messages until none is left
//	crash n1 | restart n1 | drain n1
//	pause n1 3s               freeze n1 (a GC or VM stall): it gets no event
//	                          until a tick at or after now+3s
//	partition n1,n2 n3        split into groups; heal joins them again
//	stable N                  set the stable size used for majority checks
//	send n1 <event> k=v ...   inject one event (see parseEvent)
//	state                     print every node's Machine.String
func runCommand(c *cluster, cmd string, input []string) error {
	f := strings.Fields(cmd)
	args := f[1:]
	switch f[0] {
	case "new":
		persisted := map[string]map[Slot]SlotState{}
		for _, in := range input {
			name, st, ok := strings.Cut(in, ":")
			if !ok {
				return fmt.Errorf("bad input %q", in)
			}
			m, err := ParseStates(st)
			if err != nil {
				return err
			}
			persisted[name] = m
		}
		for _, a := range args {
			if v, ok := strings.CutPrefix(a, "slots="); ok {
				n, err := strconv.Atoi(v)
				if err != nil {
					return err
				}
				c.numSlots = n
				continue
			}
			c.add(a, persisted[a])
		}
		c.stable = 0
		for _, n := range c.names {
			if c.alive[n] {
				c.stable++
			}
		}
	case "table":
		c.tables(len(args) > 0 && args[0] == "bootstrap")
	case "dead":
		c.deaths()
	case "tick":
		d, err := time.ParseDuration(args[0])
		if err != nil {
			return err
		}
		// Time moves in 100 ms ticks, as node drives it: a longer gap
		// would be a pause (see Tick). Messages wait for deliver.
		for t := c.now.Add(100 * time.Millisecond); !t.After(base.Add(d)); t = t.Add(100 * time.Millisecond) {
			c.tick(t)
		}
	case "deliver":
		c.deliver(100)
	case "pause":
		d, err := time.ParseDuration(args[1])
		if err != nil {
			return err
		}
		c.paused[args[0]] = c.now.Add(d)
	case "crash":
		c.crash(args[0])
	case "restart":
		c.restart(args[0])
	case "drain":
		c.draining[args[0]] = true
	case "partition":
		for g, grp := range args {
			for n := range strings.SplitSeq(grp, ",") {
				c.group[n] = g
			}
		}
	case "heal":
		clear(c.group)
	case "stable":
		n, err := strconv.Atoi(args[0])
		if err != nil {
			return err
		}
		c.stable = n
	case "send":
		ev, err := parseEvent(args[1:])
		if err != nil {
			return err
		}
		c.step(args[0], ev)
	case "state":
		c.out.WriteString(c.states())
	default:
		return fmt.Errorf("unknown command %q", f[0])
	}
	return nil
}

// parseEvent parses "<kind> s=0 e=1 q=2 from=n1 sent=1s" (plus the flags
// grant=true, synced=true, owner=true, replicated=true) for the message
// events: repl, ack, snapreq, snap, noreplica, offer, sealed, handover,
// epoch, restarted.
func parseEvent(f []string) (Event, error) {
	if len(f) == 0 {
		return nil, fmt.Errorf("send: no event")
	}
	var s, e, q uint64
	var from string
	grant, synced, owner, repl := false, false, false, false
	var sent time.Duration
	for _, kv := range f[1:] {
		k, v, _ := strings.Cut(kv, "=")
		var err error
		switch k {
		case "s":
			s, err = strconv.ParseUint(v, 10, 16)
		case "e":
			e, err = strconv.ParseUint(v, 10, 64)
		case "q":
			q, err = strconv.ParseUint(v, 10, 64)
		case "from":
			from = v
		case "grant":
			grant = v == "true"
		case "synced":
			synced = v == "true"
		case "owner":
			owner = v == "true"
		case "replicated":
			repl = v == "true"
		case "sent":
			sent, err = time.ParseDuration(v)
		default:
			err = fmt.Errorf("unknown key %q", k)
		}
		if err != nil {
			return nil, err
		}
	}
	sl, ep := Slot(s), Epoch(e)
	switch f[0] {
	case "repl":
		return Replicated{Slot: sl, Epoch: ep, Seq: q, From: from, Sent: base.Add(sent), Grant: grant}, nil
	case "ack":
		return ReplAck{Slot: sl, Epoch: ep, Seq: q, From: from, Sent: base.Add(sent), Grant: grant, Synced: synced}, nil
	case "snapreq":
		return SnapshotRequest{Slot: sl, Epoch: ep, From: from}, nil
	case "snap":
		return SnapshotComplete{Slot: sl, Epoch: ep, Seq: q, From: from, Sent: base.Add(sent), Grant: grant}, nil
	case "noreplica":
		return NoReplica{Slot: sl, Epoch: ep, From: from}, nil
	case "offer":
		return HandoverOffer{Slot: sl, Epoch: ep, Seq: q, From: from}, nil
	case "sealed":
		return Sealed{Slot: sl, Seq: q}, nil
	case "handover":
		return HandoverDone{Slot: sl, Epoch: ep, Seq: q, From: from}, nil
	case "epoch":
		return EpochSeen{Slot: sl, Epoch: ep, From: from, Owner: owner, Replicated: repl}, nil
	case "restarted":
		return Restarted{}, nil
	}
	return nil, fmt.Errorf("unknown event %q", f[0])
}
