#!/usr/bin/env bash
# Enforce the dependency rules of STYLE.md R1: which package may import what.
set -euo pipefail
cd "$(dirname "$0")/.."
mod=$(go list -m)
fail=0

# node/clock is a stdlib-only leaf (see its own rule below) that every
# package may use: it is left out of the closures deny looks at.
clockpkg="$mod/node/clock"

# deny PKG PATTERN REASON: PKG's dependency closure must not match PATTERN
# (node/clock aside).
deny() {
  local pkg=$1 pattern=$2 reason=$3
  compgen -G "${pkg#./}/*.go" >/dev/null || return 0
  local bad
  local self
  self=$(go list "$pkg")
  bad=$(go list -deps "$pkg" 2>/dev/null | grep -vxF "$self" | grep -vxF "$clockpkg" | grep -E "$pattern" || true)
  if [ -n "$bad" ]; then
    echo "check-deps: $pkg must not import $(echo "$bad" | tr '\n' ' '): $reason"
    fail=1
  fi
}

# only PKG ALLOWED REASON: of Chime, PKG itself may import only the packages
# matching ALLOWED (its closure then holds what they import, so a deny rule
# alone cannot say "nothing but httpapi's error type").
only() {
  local pkg=$1 allowed=$2 reason=$3
  compgen -G "${pkg#./}/*.go" >/dev/null || return 0
  local bad
  bad=$(go list -f '{{join .Imports "\n"}}' "$pkg" | grep "^$mod/" | grep -vxF "$clockpkg" | grep -vxE "$allowed" || true)
  if [ -n "$bad" ]; then
    echo "check-deps: $pkg must not import $(echo "$bad" | tr '\n' ' '): $reason"
    fail=1
  fi
}

# node/clock imports the standard library only (a path whose first element
# has a dot is a module's).
if bad=$(go list -deps ./node/clock | grep -vxF "$clockpkg" | grep -E '^[^/]+\.[^/]+/'); then
  echo "check-deps: node/clock must import the standard library only, not $(echo "$bad" | tr '\n' ' ')"
  fail=1
fi

pure='github.com/hashicorp/memberlist|github.com/cockroachdb/pebble|^net$|^net/http$|^os/exec$'
deny ./wheel "$pure|^$mod/" "wheel is a pure data structure (stdlib only)"
deny ./ring "$pure|^$mod/" "ring is a pure function (stdlib and xxhash only)"
deny ./slots "$pure|^$mod/(node|storage|wheel|ui|bench|cmd)" "slots is pure"
deny ./storage "github.com/hashicorp/memberlist|^$mod/(node|ui|bench|cmd|ring|wheel)" "storage only stores"
deny ./node/ownership "github.com/cockroachdb/pebble|^$mod/(node|storage|wheel|ui|bench|cmd)(/|$)" "the ownership executor reaches the node only through the interfaces it is built with"
deny ./node/replication "github.com/cockroachdb/pebble|github.com/hashicorp/memberlist|^$mod/(node|storage|wheel|ring/gossip|ui|cmd|bench)(/|$)" "replication reaches the node, the store and the ownership executor only through the interfaces it is built with"
deny ./node/dispatch "^$mod/(ring|slots|storage|wheel|node|ui|cmd|bench)(/|$)|^$mod/client$" "dispatch is the callback client: it knows nothing of slots, storage or the writer"
deny ./client/signature "^$mod/" "signature is the callback signature format, a pure leaf the node and the Go SDK share (stdlib only)"
deny ./node/firing "github.com/hashicorp/memberlist|^$mod/(node$|node/(httpapi|ownership|replication|dashboard|health|keyring|internalauth|tlsconf|backup|membership)|ring|slots|wheel|ui|cmd|bench)(/|$)" "firing is the pure firing state machine of one task record: storage records, the dispatcher's job and result types and schedule arithmetic only"
deny ./node/flow "github.com/hashicorp/memberlist|^$mod/(node|ring/gossip|wheel|ui|cmd|bench)(/|$)" "flow is the pure flow limiter: storage's flow record and slots only"
deny ./node/forward "^$mod/node$|^$mod/(node/(ownership|replication|dashboard|health|keyring|tlsconf|backup|membership|dispatch)|wheel|ui|cmd|bench)(/|$)" "forward is the signed client of the calls between nodes"
only ./node/forward "$mod/(node/httpapi|node/internalauth|ring|ring/gossip)" "forward uses httpapi's answer, internalauth's signer and ring's member types only"
deny ./node/chain "github.com/hashicorp/memberlist|^$mod/node$|^$mod/(node/(ownership|replication|dashboard|health|keyring|internalauth|tlsconf|backup|membership|forward)|ring/gossip|wheel|ui|cmd|bench)(/|$)" "chain is the chain outbox: it reaches the owners and the writer only through the funcs it is built with"
only ./node/metrics "$mod/(node/dispatch|ring/gossip)" "metrics is the node's collectors: it reads a callback's result and the members only"
deny ./node/idfilter "$pure|^$mod/" "idfilter is a pure Bloom filter of ids (stdlib and xxhash only)"
deny ./node/schedule "github.com/hashicorp/memberlist|^$mod/(node|ring|slots|wheel|ui|cmd|bench)" "schedule is due-time arithmetic over storage.Spec"
deny ./node/httpapi "github.com/hashicorp/memberlist|^$mod/node$|^$mod/(node/tlsconf|node/ownership|ring/gossip|wheel|ui|cmd|bench)(/|$)" "httpapi is the HTTP edge: it knows the node only through its Backend interface"
deny ./node/dashboard "github.com/cockroachdb/pebble|github.com/hashicorp/memberlist|^$mod/node$|^$mod/(storage|wheel|ring/gossip|node/httpapi|node/ownership|node/replication|node/tlsconf|ui|cmd|bench)(/|$)" "the dashboard snapshot reaches the node only through its Source"
deny ./node/internalauth "github.com/hashicorp/memberlist|^$mod/node$|^$mod/(node/(tlsconf|ownership|replication|keyring)|ring/gossip|wheel|ui|cmd|bench)(/|$)" "internalauth signs and checks calls over net/http and crypto; the membership, clock and metrics are funcs it is given"
only ./node/internalauth "$mod/node/httpapi" "internalauth uses only httpapi's error type"
deny ./node/keyring "^$mod/node$|^$mod/(node/(tlsconf|ownership|replication|internalauth)|wheel|ui|cmd|bench)(/|$)" "keyring reaches the node's keyring, view, transport and authentication only through the funcs it is built with"
only ./node/keyring "$mod/(node/httpapi|ring/gossip)" "keyring uses httpapi's error shape and gossip's keyring types only"
deny ./node/health "github.com/cockroachdb/pebble|^$mod/node$|^$mod/(storage|node/(httpapi|replication|dispatch|dashboard|tlsconf|keyring|internalauth)|wheel|ui|cmd|bench)(/|$)" "the safety net reads the due index and the clock through the funcs it is built with"
only ./node/health "$mod/node/ownership" "health uses only ownership's stall report"
deny ./node/backup "github.com/hashicorp/memberlist|^$mod/node$|^$mod/(node/(tlsconf|ownership|replication|keyring|internalauth|dashboard)|ring/gossip|wheel|ui|cmd|bench)(/|$)" "backup streams a checkpoint taken by the func it is built with; it knows neither the store nor the node"
only ./node/backup "$mod/node/httpapi" "backup uses only httpapi's error shape"
deny ./node/membership "github.com/cockroachdb/pebble|^$mod/(node|storage|wheel|ui|bench|cmd)(/|$)" "the membership joins, gossips and builds views: it reaches the node only through the install func it is built with"
deny ./client "github.com/cockroachdb/pebble|github.com/hashicorp/memberlist|^$mod/(node|storage|ring/gossip|wheel|ui|cmd|bench)(/|$)" "client is the Go SDK: programs import it without the server"
only ./client "$mod/(slots|client/signature)" "client uses only slots.Of and the signature format"
deny ./ui "github.com/cockroachdb/pebble|github.com/hashicorp/memberlist|^$mod/(node|storage|cmd|bench)" "ui talks to the node through its own interface"

# One listing of every package and its direct imports ("path imp imp …")
# for the rules below.
imports=$(go list -f '{{.ImportPath}}{{range .Imports}} {{.}}{{end}}' ./...)

# Only storage may import pebble directly.
for p in $(echo "$imports" | awk -v s="$mod/storage" '$1 != s { for (i = 2; i <= NF; i++) if ($i ~ /^github.com\/cockroachdb\/pebble/) { print $1; next } }'); do
  echo "check-deps: $p imports pebble directly; go through storage.Store"
  fail=1
done

# httpapi uses storage's record types only (Task, Spec, Position, …),
# never the store itself.
if grep -nE '\bstorage\.(Store|Open|Options|Batch|MemFS|NewMemFS|SlotOps|SlotMeta)\b' node/httpapi/*.go | grep -v '_test.go:'; then
  echo "check-deps: node/httpapi uses the store; it may use storage's record types only (the node reads and writes through httpapi.Backend)"
  fail=1
fi

# One clock: under node/, only node/clock reads the time or waits on it;
# everything else is given a clock.Clock (or its Now) at construction.
# Time arithmetic (t.Add, t.Sub, time.Unix, …) is not reading the clock.
if grep -rnE '\btime\.(Now|Since|Until|After|AfterFunc|Sleep|NewTicker|NewTimer|Tick)\b' node --include='*.go' |
  grep -v '_test\.go:' | grep -v '^node/clock/' | grep -vE '^[^:]+:[0-9]+:\s*//'; then
  echo "check-deps: a direct time call under node/; take the time from the node's clock.Clock (node/clock)"
  fail=1
fi

# Only cmd/ imports node: the node's parts are its sub-packages, which it wires.
for p in $(echo "$imports" | awk -v c="$mod/cmd/" -v n="$mod/node" 'index($1, c) != 1 { for (i = 2; i <= NF; i++) if ($i == n) { print $1; next } }'); do
  echo "check-deps: $p imports node; only cmd/ may (node wires its sub-packages, not the other way round)"
  fail=1
done

# Only node imports node/membership: the membership is a part node wires.
if bad=$(echo "$imports" |
  awk -v m="$mod/node/membership" -v n="$mod/node" '$1 != n { for (i = 2; i <= NF; i++) if ($i == m) print $1 }' | grep .); then
  echo "check-deps: $(echo "$bad" | tr '\n' ' ')imports node/membership; only node may (it wires the membership)"
  fail=1
fi
# slots, ring and wheel run on one goroutine: they start none and share
# nothing (no sync, no atomics), so the race detector has nothing to find
# in them, and make test-race runs their tests without it (9x cheaper).
for d in slots ring wheel; do
  if grep -nE '(^|[^A-Za-z0-9_."])go +(func *\(|[A-Za-z_][A-Za-z0-9_.]*\()' $(ls $d/*.go | grep -v '_test\.go$') |
    sed 's|//.*||' | grep -E '(^|[^A-Za-z0-9_."])go +(func *\(|[A-Za-z_][A-Za-z0-9_.]*\()'; then
    echo "check-deps: $d starts a goroutine; it runs on its caller's (and its tests without -race: see the Makefile)"
    fail=1
  fi
  if echo "$imports" | awk -v p="$mod/$d" '$1 == p { for (i = 2; i <= NF; i++) if ($i == "sync" || $i == "sync/atomic") print $i }' | grep .; then
    echo "check-deps: $d imports sync; it shares nothing between goroutines (and its tests run without -race: see the Makefile)"
    fail=1
  fi
done
exit $fail
