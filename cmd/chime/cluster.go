package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
)

// clusterUsage is printed by `chime cluster`, `chime cluster -h` and on an
// unknown verb.
const clusterUsage = `usage: chime cluster <verb> [flags]

verbs:
  status             members, their state, addresses and slots, as seen by one node
  forget NAME        declare a dead (or left) member gone for good, with its data: every member
                     counts it as left, so the others can be a majority without it, and its slots
                     nobody holds a grant of are taken from the live copies (only for a node that
                     will never come back with its data: one alive behind a partition would then
                     own slots twice)
  keys list          the gossip keys of the live members, by fingerprint (keys are never shown)
  keys install KEY   add a gossip key (base64 of 32 bytes) on every live member: they accept it
  keys use KEY       make an installed key the one every member sends with
  keys remove KEY    remove a key nobody uses any more: it is refused from then on
                     (rotate: install NEW, use NEW, remove OLD; --key-file F reads KEY from F)

flags:
  --addr URL[,URL…]  node to ask, or seeds to try in turn (default $CHIME_ADDR, else ` + defaultAddr + `)
  --token T          API token (default $CHIME_API_TOKEN)
  --json             print the server's JSON answer instead of a table
  --timeout D        request timeout (default 10s)
`

// runCluster runs `chime cluster <verb> ...`. args excludes "cluster".
func runCluster(ctx context.Context, args []string, stdout, stderr io.Writer, env func(string) string) error {
	cc := &clusterCmd{taskCmd{stdin: os.Stdin, stdout: stdout, stderr: stderr, env: env}}
	return cc.run(ctx, args)
}

// clusterCmd holds the I/O of one `chime cluster` invocation. It embeds
// taskCmd for the helpers both commands share: the client built from
// --addr/--token and the environment, and JSON and table output.
type clusterCmd struct {
	taskCmd
}

// run dispatches on the verb.
func (cc *clusterCmd) run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		fmt.Fprint(cc.stderr, clusterUsage)
		return errors.New("cluster: missing verb")
	}
	switch verb, rest := args[0], args[1:]; verb {
	case "-h", "-help", "--help", "help":
		fmt.Fprint(cc.stderr, clusterUsage)
		return nil
	case "status":
		return cc.status(ctx, rest)
	case "forget":
		return cc.forget(ctx, rest)
	case "keys":
		return cc.keys(ctx, rest)
	default:
		fmt.Fprint(cc.stderr, clusterUsage)
		return fmt.Errorf("cluster: unknown verb %q", verb)
	}
}

// parseVerb parses the flags of `chime cluster <verb>` (synopsis: the verb
// and its arguments, for the usage) and returns them with the positional
// arguments. done is set after -h or a bad flag (the usage or the error is
// printed already); the verb then returns err.
func (cc *clusterCmd) parseVerb(verb, synopsis string, args []string, more ...func(*flag.FlagSet)) (cf *commonFlags, pos []string, done bool, err error) {
	fs := flag.NewFlagSet("cluster "+verb, flag.ContinueOnError)
	for _, f := range more {
		f(fs)
	}
	fs.SetOutput(cc.stderr)
	fs.Usage = func() {
		fmt.Fprintf(cc.stderr, "usage: chime cluster %s [flags]\n\nflags:\n", synopsis)
		fs.PrintDefaults()
	}
	cf = &commonFlags{}
	cf.register(fs)
	pos, help, err := parseArgs(fs, args)
	return cf, pos, help || err != nil, err
}

// status runs `status`: GET /v1/cluster, printed as a table or as JSON.
func (cc *clusterCmd) status(ctx context.Context, args []string) error {
	cf, pos, done, err := cc.parseVerb("status", "status", args)
	if done {
		return err
	}
	if len(pos) > 0 {
		return fmt.Errorf("cluster status: unexpected argument %q", pos[0])
	}
	c, err := cc.client(cf)
	if err != nil {
		return err
	}
	body, err := c.Cluster(ctx, true)
	if err != nil {
		return c.fail(err)
	}
	if cf.json {
		return cc.printJSON(body)
	}
	var view clusterView
	if err := decodeAnswer(body, &view); err != nil {
		return err
	}
	var buf bytes.Buffer
	if err := writeCluster(&buf, view); err != nil {
		return err
	}
	return cc.write(buf.Bytes())
}

// forget runs `forget NAME`: POST /v1/cluster/members/NAME/forget.
func (cc *clusterCmd) forget(ctx context.Context, args []string) error {
	cf, pos, done, err := cc.parseVerb("forget", "forget NAME", args)
	if done {
		return err
	}
	if len(pos) != 1 {
		return errors.New("cluster forget: want exactly one member name")
	}
	c, err := cc.client(cf)
	if err != nil {
		return err
	}
	body, err := c.ForgetMember(ctx, pos[0])
	if err != nil {
		return c.fail(err)
	}
	if cf.json {
		return cc.printJSON(body)
	}
	return cc.write([]byte(pos[0] + " forgotten: every member counts it as left\n"))
}

// keys runs `keys list|install|use|remove [KEY]`: GET or POST
// /v1/cluster/keys. It fails when a live member did not apply the change.
func (cc *clusterCmd) keys(ctx context.Context, args []string) error {
	var keyFile string
	cf, pos, done, err := cc.parseVerb("keys", "keys list | keys install|use|remove KEY|--key-file F", args, func(fs *flag.FlagSet) {
		fs.StringVar(&keyFile, "key-file", "", "read KEY from this file")
	})
	if done {
		return err
	}
	if len(pos) == 0 {
		return errors.New("cluster keys: want list, install, use or remove")
	}
	op, pos := pos[0], pos[1:]
	var key string
	switch op {
	case "list":
		if len(pos) > 0 || keyFile != "" {
			return errors.New("cluster keys list: takes no key")
		}
	case "install", "use", "remove":
		if key, err = keyArg(op, pos, keyFile); err != nil {
			return err
		}
	default:
		return fmt.Errorf("cluster keys: unknown operation %q: want list, install, use or remove", op)
	}
	c, err := cc.client(cf)
	if err != nil {
		return err
	}
	var body []byte
	if op == "list" {
		body, err = c.Keys(ctx)
	} else {
		body, err = c.ChangeKeys(ctx, op, key)
	}
	if err != nil {
		return c.fail(err)
	}
	var res keysView
	if err := decodeAnswer(body, &res); err != nil {
		return err
	}
	if cf.json {
		err = cc.printJSON(body)
	} else {
		err = cc.write(keysText(res))
	}
	if err == nil && len(res.Failed) > 0 {
		err = fmt.Errorf("cluster keys %s: %d live member(s) did not apply it", op, len(res.Failed))
	}
	return err
}

// keyArg is the KEY of a keys operation: the one argument, or the
// content of --key-file (not both).
func keyArg(op string, pos []string, keyFile string) (string, error) {
	switch {
	case keyFile != "" && len(pos) == 0:
		b, err := os.ReadFile(keyFile)
		if err != nil {
			return "", fmt.Errorf("cluster keys %s: %w", op, err)
		}
		return strings.TrimSpace(string(b)), nil
	case keyFile == "" && len(pos) == 1:
		return pos[0], nil
	}
	return "", fmt.Errorf("cluster keys %s: want one KEY (base64 of 32 bytes) or --key-file", op)
}

// keysView is the answer of /v1/cluster/keys.
type keysView struct {
	Op       string            `json:"op"`
	Members  int               `json:"members"`
	Answered int               `json:"answered"`
	Keys     []keyCountView    `json:"keys"`
	Failed   map[string]string `json:"failed"`
	Down     []string          `json:"down"`
}

type keyCountView struct {
	Fingerprint string `json:"fingerprint"`
	Installed   int    `json:"installed"`
	Primary     int    `json:"primary"`
}

// keysText renders a keys answer: who answered, one row per key, then the
// members that failed or were not asked.
func keysText(v keysView) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s: %d of %d members answered\n", v.Op, v.Answered, v.Members)
	rows := [][]string{{"KEY", "INSTALLED", "PRIMARY"}}
	for _, k := range v.Keys {
		rows = append(rows, []string{k.Fingerprint, fmt.Sprintf("%d/%d", k.Installed, v.Answered), fmt.Sprintf("%d/%d", k.Primary, v.Answered)})
	}
	_ = writeTable(&b, rows)
	for _, name := range slices.Sorted(maps.Keys(v.Failed)) {
		fmt.Fprintf(&b, "failed on %s: %s\n", name, v.Failed[name])
	}
	if len(v.Down) > 0 {
		fmt.Fprintf(&b, "not asked (down): %s; a member that missed a change cannot gossip with the others until it gets it\n", strings.Join(v.Down, ", "))
	}
	return b.Bytes()
}

// clusterView is the part of GET /v1/cluster the table shows. As in
// table.go, scalar fields are texts so an unexpected type still prints.
type clusterView struct {
	Self         text         `json:"self"`
	TableVersion text         `json:"table_version"`
	ViewChecksum text         `json:"view_checksum"`
	Settled      text         `json:"settled"`
	Members      []memberView `json:"members"`
}

// memberView is one member of GET /v1/cluster.
type memberView struct {
	Name            text            `json:"name"`
	GossipAddr      text            `json:"gossip_addr"`
	HTTPAddr        text            `json:"http_addr"`
	State           text            `json:"state"`     // joining, active, draining, left, dead
	Status          text            `json:"status"`    // alive, dead, left: what gossip says
	Forgotten       bool            `json:"forgotten"` // left: an operator forgot it
	SlotsOwned      text            `json:"slots_owned"`
	SlotsFollowing  text            `json:"slots_following"`
	OwnedRanges     json.RawMessage `json:"owned_ranges"` // [[first,last],…]; kept raw so odd shapes still print
	FollowingRanges json.RawMessage `json:"following_ranges"`
}

// maxRangesCell bounds the RANGES column. With rendezvous hashing a node
// owns thousands of short runs of slots, so the column shows the first few
// and counts the rest; --json has them all.
const maxRangesCell = 40

// writeCluster renders a cluster answer: one header line (which node
// answered, how many members, the slot table's version and checksum, and
// whether the table is settled), then one row per member, ordered by name.
func writeCluster(buf *bytes.Buffer, v clusterView) error {
	settled := cell(v.Settled)
	switch settled {
	case "true":
		settled = "yes"
	case "false":
		settled = "no"
	}
	fmt.Fprintf(buf, "self: %s  members: %d  table version: %s  checksum: %s  settled: %s\n",
		cell(v.Self), len(v.Members), cell(v.TableVersion), cell(v.ViewChecksum), settled)
	if len(v.Members) == 0 {
		buf.WriteString("no members\n")
		return nil
	}
	members := slices.Clone(v.Members)
	slices.SortStableFunc(members, func(a, b memberView) int { return compareNames(string(a.Name), string(b.Name)) })
	rows := [][]string{{"NAME", "STATE", "HTTP", "GOSSIP", "OWNED", "FOLLOWING", "RANGES"}}
	for _, m := range members {
		rows = append(rows, []string{
			cell(m.Name), memberState(m), cell(m.HTTPAddr), cell(m.GossipAddr),
			cell(m.SlotsOwned), cell(m.SlotsFollowing), rangesText(m.OwnedRanges, maxRangesCell),
		})
	}
	return writeTable(buf, rows)
}

// memberState is the member's ring state, with the gossip status added when
// it says something the state does not: "active (dead)" is a member gossip
// has declared dead whose slots have not moved yet, "left (forgotten)" one
// an operator forgot.
func memberState(m memberView) string {
	state, status := cell(m.State), cell(m.Status)
	if m.Forgotten {
		status = "forgotten"
	}
	if status == "-" || status == "alive" || status == state {
		return state
	}
	return state + " (" + status + ")"
}

// compareNames orders node names so that a run of digits compares by its
// value: n2 before n10.
func compareNames(a, b string) int {
	for a != "" && b != "" {
		da, db := digitPrefix(a), digitPrefix(b)
		if da == "" || db == "" {
			if c := cmp.Compare(a[0], b[0]); c != 0 {
				return c
			}
			a, b = a[1:], b[1:]
			continue
		}
		na, nb := strings.TrimLeft(da, "0"), strings.TrimLeft(db, "0")
		if c := cmp.Or(cmp.Compare(len(na), len(nb)), strings.Compare(na, nb), cmp.Compare(len(da), len(db))); c != 0 {
			return c
		}
		a, b = a[len(da):], b[len(db):]
	}
	return cmp.Compare(len(a), len(b))
}

// digitPrefix returns the leading ASCII digits of s.
func digitPrefix(s string) string {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return s[:i]
}

// rangesText shows slot ranges ([[0,3],[4,5],[9,12]]) compactly: sorted,
// adjacent and overlapping ranges merged, a one-slot range as its number,
// e.g. "0-5,9-12". When the text would exceed width, it stops at the last
// range that fits and adds " (+N more)". An empty list is "-"; a value that
// is not a list of [first,last] pairs is shown shortened, as it came.
func rangesText(raw json.RawMessage, width int) string {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || string(trimmed) == "null" {
		return "-"
	}
	var pairs [][]int64
	if err := json.Unmarshal(trimmed, &pairs); err != nil {
		return shorten(cell(text(trimmed)), width)
	}
	ranges := make([][2]int64, 0, len(pairs))
	for _, p := range pairs {
		if len(p) != 2 || p[0] > p[1] {
			return shorten(cell(text(trimmed)), width)
		}
		ranges = append(ranges, [2]int64{p[0], p[1]})
	}
	if len(ranges) == 0 {
		return "-"
	}
	slices.SortFunc(ranges, func(a, b [2]int64) int { return cmp.Or(cmp.Compare(a[0], b[0]), cmp.Compare(a[1], b[1])) })
	merged := ranges[:1]
	for _, r := range ranges[1:] {
		last := &merged[len(merged)-1]
		if r[0] <= last[1]+1 {
			last[1] = max(last[1], r[1])
			continue
		}
		merged = append(merged, r)
	}
	var b strings.Builder
	for i, r := range merged {
		part := strconv.FormatInt(r[0], 10)
		if r[1] != r[0] {
			part += "-" + strconv.FormatInt(r[1], 10)
		}
		if i > 0 {
			part = "," + part
		}
		if rest := len(merged) - i; i > 0 && b.Len()+len(part) > width-len(moreText(rest)) {
			// The rest cannot all fit: stop here, unless this is the last
			// range and it fits without a "(+N more)".
			if rest > 1 || b.Len()+len(part) > width {
				b.WriteString(moreText(rest))
				break
			}
		}
		b.WriteString(part)
	}
	return b.String()
}

// moreText is the suffix counting the ranges rangesText left out.
func moreText(n int) string {
	return " (+" + strconv.Itoa(n) + " more)"
}
