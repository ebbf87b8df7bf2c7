package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chime-scheduler/chime/slots"
)

// runClusterCLI runs `chime cluster args…` against the fake node f (when
// non-nil, "--addr <fake URL>" is appended) with the given environment.
func runClusterCLI(t *testing.T, f *fakeNode, env map[string]string, args ...string) cliResult {
	t.Helper()
	if f != nil {
		args = append(append([]string(nil), args...), "--addr", f.srv.URL)
	}
	var stdout, stderr bytes.Buffer
	cc := &clusterCmd{taskCmd{
		stdin:  strings.NewReader(""),
		stdout: &stdout,
		stderr: &stderr,
		env:    func(k string) string { return env[k] },
	}}
	err := cc.run(t.Context(), args)
	return cliResult{stdout: stdout.String(), stderr: stderr.String(), err: err}
}

// clusterJSON is a GET /v1/cluster answer of a three-node cluster, members
// out of name order, n3 just declared dead by gossip.
const clusterJSON = `{"self":"n1","table_version":1234567890123,"view_checksum":"00000123abcdef00","settled":false,
"members":[
 {"name":"n3","gossip_addr":"127.0.0.1:7948","http_addr":"127.0.0.1:7072","state":"active","status":"dead",
  "slots_owned":5461,"slots_following":5461,"owned_ranges":[[2,2],[5,5]],"following_ranges":[[0,0]]},
 {"name":"n1","gossip_addr":"127.0.0.1:7946","http_addr":"127.0.0.1:7070","state":"active","status":"alive",
  "slots_owned":5461,"slots_following":5462,"owned_ranges":[[7,7],[0,3],[4,5]],"following_ranges":[[6,6]]},
 {"name":"n2","gossip_addr":"127.0.0.1:7947","http_addr":"127.0.0.1:7071","state":"joining","status":"alive",
  "slots_owned":5462,"slots_following":5461,"owned_ranges":[[6,6]],"following_ranges":[]}
]}`

func TestClusterStatusTable(t *testing.T) {
	tests := []struct {
		name   string
		answer string
		want   string
	}{
		{
			name:   "three nodes",
			answer: clusterJSON,
			want: `self: n1  members: 3  table version: 1234567890123  checksum: 00000123abcdef00  settled: no
NAME  STATE          HTTP            GOSSIP          OWNED  FOLLOWING  RANGES
n1    active         127.0.0.1:7070  127.0.0.1:7946  5461   5462       0-5,7
n2    joining        127.0.0.1:7071  127.0.0.1:7947  5462   5461       6
n3    active (dead)  127.0.0.1:7072  127.0.0.1:7948  5461   5461       2,5
`,
		},
		{
			name: "single node without the cluster fields",
			answer: `{"self":"chime-7070","members":[{"name":"chime-7070","gossip_addr":"","http_addr":"127.0.0.1:7070",
				"state":"active","slots_owned":16384,"slots_following":0}],"table_version":1}`,
			want: `self: chime-7070  members: 1  table version: 1  checksum: -  settled: -
NAME        STATE   HTTP            GOSSIP  OWNED  FOLLOWING  RANGES
chime-7070  active  127.0.0.1:7070  -       16384  0          -
`,
		},
		{
			name:   "settled",
			answer: `{"self":"n1","table_version":7,"view_checksum":"ab","settled":true,"members":[{"name":"n1","state":"left","status":"left","slots_owned":0,"slots_following":0,"owned_ranges":[]}]}`,
			want: `self: n1  members: 1  table version: 7  checksum: ab  settled: yes
NAME  STATE  HTTP  GOSSIP  OWNED  FOLLOWING  RANGES
n1    left   -     -       0      0          -
`,
		},
		{
			name:   "forgotten",
			answer: `{"self":"n1","table_version":7,"members":[{"name":"n2","state":"left","status":"left","forgotten":true,"slots_owned":0,"slots_following":0}]}`,
			want: `self: n1  members: 1  table version: 7  checksum: -  settled: -
NAME  STATE             HTTP  GOSSIP  OWNED  FOLLOWING  RANGES
n2    left (forgotten)  -     -       0      0          -
`,
		},
		{
			name:   "no members",
			answer: `{"self":"n1","table_version":0,"members":[]}`,
			want: `self: n1  members: 0  table version: 0  checksum: -  settled: -
no members
`,
		},
		{
			name:   "names in numeric order",
			answer: `{"self":"n10","members":[{"name":"n10"},{"name":"n9"},{"name":"n1"}]}`,
			want: `self: n10  members: 3  table version: -  checksum: -  settled: -
NAME  STATE  HTTP  GOSSIP  OWNED  FOLLOWING  RANGES
n1    -      -     -       -      -          -
n9    -      -     -       -      -          -
n10   -      -     -       -      -          -
`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeNode(t, constant(200, tt.answer))
			res := runClusterCLI(t, f, nil, "status")
			if res.err != nil {
				t.Fatalf("cluster status: %v\nstderr: %s", res.err, res.stderr)
			}
			if res.stdout != tt.want {
				t.Errorf("cluster status printed\n%s\nwant\n%s", res.stdout, tt.want)
			}
			if r := f.onlyRequest(t); r.Method != "GET" || r.Path != "/v1/cluster" {
				t.Errorf("request = %s %s, want GET /v1/cluster", r.Method, r.Path)
			}
		})
	}
}

func TestClusterStatusJSON(t *testing.T) {
	f := newFakeNode(t, constant(200, clusterJSON))
	res := runClusterCLI(t, f, nil, "status", "--json")
	if res.err != nil {
		t.Fatal(res.err)
	}
	assertJSON(t, []byte(res.stdout), clusterJSON)
	if !strings.HasPrefix(res.stdout, "{\n  \"self\": \"n1\",\n") || !strings.HasSuffix(res.stdout, "}\n") {
		t.Errorf("--json output is not indented by two spaces:\n%s", res.stdout)
	}
}

func TestClusterStatusToken(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"flag", []string{"status", "--token", "s3cret"}, nil, "Bearer s3cret"},
		{"environment", []string{"status"}, map[string]string{"CHIME_API_TOKEN": "from-env"}, "Bearer from-env"},
		{"flag wins", []string{"status", "--token", "flag"}, map[string]string{"CHIME_API_TOKEN": "env"}, "Bearer flag"},
		{"none", []string{"status"}, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeNode(t, constant(200, clusterJSON))
			if res := runClusterCLI(t, f, tt.env, tt.args...); res.err != nil {
				t.Fatal(res.err)
			}
			if got := f.onlyRequest(t).Header.Get("Authorization"); got != tt.want {
				t.Errorf("Authorization = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestClusterStatusErrors(t *testing.T) {
	t.Run("api error", func(t *testing.T) {
		f := newFakeNode(t, constant(401, `{"error":{"code":"unauthenticated","message":"missing bearer token"}}`))
		res := runClusterCLI(t, f, nil, "status")
		if res.err == nil || res.err.Error() != "401 unauthenticated: missing bearer token" {
			t.Errorf("cluster status error = %v, want the API error", res.err)
		}
	})
	t.Run("not json", func(t *testing.T) {
		f := newFakeNode(t, constant(200, `<html>`))
		res := runClusterCLI(t, f, nil, "status")
		if res.err == nil || !strings.Contains(res.err.Error(), "<html>") {
			t.Errorf("cluster status error = %v, want one quoting the answer", res.err)
		}
	})
	usage := []struct {
		name    string
		args    []string
		wantErr string // empty: no error
	}{
		{"missing verb", nil, "cluster: missing verb"},
		{"unknown verb", []string{"members"}, `cluster: unknown verb "members"`},
		{"help", []string{"-h"}, ""},
		{"extra argument", []string{"status", "n1"}, `cluster status: unexpected argument "n1"`},
		{"forget without a name", []string{"forget"}, "cluster forget: want exactly one member name"},
		{"forget two", []string{"forget", "n1", "n2"}, "cluster forget: want exactly one member name"},
	}
	for _, tt := range usage {
		t.Run(tt.name, func(t *testing.T) {
			res := runClusterCLI(t, nil, nil, tt.args...)
			switch {
			case tt.wantErr == "" && res.err != nil:
				t.Errorf("cluster %q: %v, want no error", tt.args, res.err)
			case tt.wantErr != "" && (res.err == nil || res.err.Error() != tt.wantErr):
				t.Errorf("cluster %q: %v, want %q", tt.args, res.err, tt.wantErr)
			}
		})
	}
	t.Run("status -h", func(t *testing.T) {
		res := runClusterCLI(t, nil, nil, "status", "-h")
		if res.err != nil || !strings.HasPrefix(res.stderr, "usage: chime cluster status") {
			t.Errorf("status -h: %v, stderr %q; want the usage and no error", res.err, res.stderr)
		}
	})
	t.Run("bad flag", func(t *testing.T) {
		res := runClusterCLI(t, nil, nil, "status", "--nope")
		if !errors.Is(res.err, flag.ErrHelp) {
			t.Errorf("status --nope: %v, want an already-printed error", res.err)
		}
	})
}

func TestClusterRangesText(t *testing.T) {
	tests := []struct {
		name  string
		raw   string
		width int
		want  string
	}{
		{"absent", ``, 40, "-"},
		{"null", `null`, 40, "-"},
		{"empty", `[]`, 40, "-"},
		{"one slot", `[[7,7]]`, 40, "7"},
		{"merged and sorted", `[[9,12],[0,3],[4,5],[11,11]]`, 40, "0-5,9-12"},
		{"overlapping", `[[0,10],[5,6],[10,20]]`, 40, "0-20"},
		{"exactly fits", `[[0,5],[9,12]]`, 8, "0-5,9-12"},
		{"truncated", `[[0,1],[3,4],[6,7],[9,10],[12,13]]`, 20, "0-1,3-4 (+3 more)"},
		{"first always shown", `[[100,16383],[0,0]]`, 4, "0 (+1 more)"},
		{"long first", `[[1000,16383]]`, 4, "1000-16383"},
		{"not pairs", `[[1,2,3]]`, 40, "[[1,2,3]]"},
		{"reversed pair", `[[5,1]]`, 40, "[[5,1]]"},
		{"not a list", `"0-5"`, 40, `"0-5"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := rangesText(json.RawMessage(tt.raw), tt.width); got != tt.want {
				t.Errorf("rangesText(%s, %d) = %q, want %q", tt.raw, tt.width, got, tt.want)
			}
		})
	}
}

func TestClusterRangesTextWidth(t *testing.T) {
	// Every other slot of 16384: thousands of one-slot ranges, as rendezvous
	// hashing produces. The cell stays within its width.
	var b strings.Builder
	b.WriteString("[")
	for s := 0; s < 16384; s += 2 {
		if s > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, "[%d,%d]", s, s)
	}
	b.WriteString("]")
	got := rangesText(json.RawMessage(b.String()), maxRangesCell)
	if len(got) > maxRangesCell || !strings.HasPrefix(got, "0,2,4,") || !strings.HasSuffix(got, " more)") {
		t.Errorf("rangesText(every other slot) = %q (%d bytes), want at most %d bytes ending in (+N more)", got, len(got), maxRangesCell)
	}
}

func TestClusterCompareNames(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{
		{"n1", "n2", -1},
		{"n2", "n10", -1},
		{"n10", "n9", 1},
		{"n1", "n1", 0},
		{"n01", "n1", 1},
		{"a", "b", -1},
		{"n", "n1", -1},
		{"node-2-b", "node-10-a", -1},
		{"x7", "n7", 1},
	}
	for _, tt := range tests {
		if got := compareNames(tt.a, tt.b); got != tt.want {
			t.Errorf("compareNames(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}

func TestClusterFlagsMaxMoves(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		want    int
		wantErr string
	}{
		{nil, slots.DefaultMaxMoves, ""},
		{[]string{"--max-moves", "64"}, 64, ""},
		{[]string{"--max-moves", "0"}, 0, "--max-moves 0: want at least 1"},
	} {
		var c clusterFlags
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		c.register(fs)
		if err := fs.Parse(append([]string{"--gossip-addr", "127.0.0.1:0", "--insecure-cluster"}, tc.args...)); err != nil {
			t.Fatal(err)
		}
		cc, err := c.config("")
		switch {
		case tc.wantErr != "":
			if err == nil || err.Error() != tc.wantErr {
				t.Errorf("%v: err %v, want %q", tc.args, err, tc.wantErr)
			}
		case err != nil:
			t.Errorf("%v: %v", tc.args, err)
		case cc.MaxMoves != tc.want:
			t.Errorf("%v: MaxMoves %d, want %d", tc.args, cc.MaxMoves, tc.want)
		}
	}
}

func TestClusterForget(t *testing.T) {
	f := newFakeNode(t, constant(200, `{"forgotten":"n2"}`))
	res := runClusterCLI(t, f, nil, "forget", "n2")
	if res.err != nil || res.stdout != "n2 forgotten: every member counts it as left\n" {
		t.Errorf("cluster forget n2: %v, stdout %q", res.err, res.stdout)
	}
	if r := f.onlyRequest(t); r.Method != "POST" || r.Path != "/v1/cluster/members/n2/forget" {
		t.Errorf("request %s %s, want POST /v1/cluster/members/n2/forget", r.Method, r.Path)
	}
	f = newFakeNode(t, constant(409, `{"error":{"code":"conflict","message":"n2 is alive","field":"name"}}`))
	if res := runClusterCLI(t, f, nil, "forget", "n2"); res.err == nil || !strings.Contains(res.err.Error(), "409 conflict") {
		t.Errorf("cluster forget of a live member: %v, want the 409", res.err)
	}
}

// TestClusterSecrets: a cluster never runs open by accident. Cluster mode
// needs a cluster secret of 32+ bytes and a gossip key, from flags,
// environment or files, unless --insecure-cluster says so; the secret
// never falls back to the gossip key or the API token.
func TestClusterSecrets(t *testing.T) {
	dir := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	const secret = "0123456789abcdef0123456789abcdef"
	key := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 32))
	secretFile, keyFile := file("secret", secret+"\n"), file("key", key+"\n")
	empty := file("empty", "\n")
	tests := []struct {
		name       string
		args       []string
		env        map[string]string
		wantSecret string
		insecure   bool
		wantErr    string
	}{
		{name: "no secrets", wantErr: "a cluster needs --cluster-secret"},
		{name: "only a gossip key (no fallback)", args: []string{"--gossip-key", key}, wantErr: "a cluster needs --cluster-secret"},
		{name: "only a secret", args: []string{"--cluster-secret", secret}, wantErr: "a cluster needs --cluster-secret"},
		{name: "short secret", args: []string{"--cluster-secret", "short", "--gossip-key", key}, wantErr: "needs at least 32"},
		{name: "flags", args: []string{"--cluster-secret", secret, "--gossip-key", key}, wantSecret: secret},
		{name: "environment", env: map[string]string{"CHIME_CLUSTER_SECRET": secret, "CHIME_GOSSIP_KEY": key}, wantSecret: secret},
		{name: "files", args: []string{"--cluster-secret-file", secretFile, "--gossip-key-file", keyFile}, wantSecret: secret},
		{name: "files from the environment", env: map[string]string{"CHIME_CLUSTER_SECRET_FILE": secretFile, "CHIME_GOSSIP_KEY_FILE": keyFile}, wantSecret: secret},
		{name: "flag and file", args: []string{"--cluster-secret", secret, "--cluster-secret-file", secretFile, "--gossip-key", key}, wantErr: "both given"},
		{name: "empty file", args: []string{"--cluster-secret-file", empty, "--gossip-key", key}, wantErr: "is empty"},
		{name: "missing file", args: []string{"--cluster-secret-file", filepath.Join(dir, "nope"), "--gossip-key", key}, wantErr: "no such file"},
		{name: "insecure on purpose", args: []string{"--insecure-cluster"}, insecure: true},
		{name: "insecure with a secret still signs", args: []string{"--insecure-cluster", "--cluster-secret", secret}, insecure: true, wantSecret: secret},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var c clusterFlags
			fs := flag.NewFlagSet("serve", flag.ContinueOnError)
			c.register(fs)
			env := func(k string) string { return tc.env[k] }
			if err := parseWithEnv(fs, append([]string{"--gossip-addr", "127.0.0.1:0"}, tc.args...), env); err != nil {
				t.Fatal(err)
			}
			cc, err := c.config("")
			switch {
			case tc.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("err %v, want one containing %q", err, tc.wantErr)
				}
				if err != nil && strings.Contains(err.Error(), "\n") {
					t.Errorf("the refusal is not one line: %q", err)
				}
			case err != nil:
				t.Errorf("unexpected error: %v", err)
			case string(cc.Secret) != tc.wantSecret || cc.Insecure != tc.insecure:
				t.Errorf("secret %q insecure %v, want %q %v", cc.Secret, cc.Insecure, tc.wantSecret, tc.insecure)
			}
		})
	}
}
