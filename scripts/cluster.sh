#!/usr/bin/env bash
# cluster.sh runs a local Chime cluster: one `chime serve` process per node,
# all on loopback, each in its own session so it outlives this script.
#
# usage: scripts/cluster.sh <command> [args]
#
#   up N              build the binary (unless CHIME_BIN), start n1..nN, wait until every /readyz
#                     answers 200, print "name http-url gossip-addr" per node
#   status            one line per node (index, name, pid, alive/dead, ready),
#                     then `chime cluster status` as the first live node sees it
#   start I           start node I; I = size+1 adds a node to the cluster
#   stop I            SIGTERM node I and wait for it to exit
#   kill I            SIGKILL node I
#   restart I         stop, then start node I
#   logs [-f] [-n N] I
#                     print node I's log (-n: the last N lines; -f: follow it)
#   down [--wipe]     SIGTERM every node, SIGKILL those still up after 15 s;
#                     --wipe then deletes the nodes' data, logs and secrets
#
# Node I is named nI, serves HTTP on 127.0.0.1:$((CHIME_BASE_PORT+I-1)) and
# gossips on 127.0.0.1:$((CHIME_GOSSIP_BASE_PORT+I-1)); it joins all the
# other nodes. Its data, log and pid file are in $CHIME_CLUSTER_DIR/nI/.
#
# environment:
#   CHIME_CLUSTER_DIR       state directory (default: .cluster in the repo root)
#   CHIME_BASE_PORT         HTTP port of n1 (default 7070)
#   CHIME_GOSSIP_BASE_PORT  gossip port of n1 (default 7946)
#   CHIME_SERVE_ARGS        extra `chime serve` flags for every node
#   CHIME_READY_TIMEOUT     seconds to wait for /readyz (default 60)
#   CHIME_BIN               a chime binary to run instead of building one
#                           from this checkout (copied to $CHIME_CLUSTER_DIR/bin)
#   CHIME_API_TOKEN         read by the nodes (as --api-token) and by
#                           `chime cluster status` alike
#   CHIME_CLUSTER_SECRET, CHIME_GOSSIP_KEY (or their _FILE forms)
#                           the cluster's secrets; without them the script
#                           makes a random pair on first use in
#                           $CHIME_CLUSTER_DIR/secrets/ (mode 0600) and hands
#                           them to the nodes as files (not in `ps`)
#   CHIME_TLS=1             serve HTTPS, with mutual TLS between the nodes: a
#                           development CA and one certificate per node are
#                           made on first use in $CHIME_CLUSTER_DIR/secrets/tls/
#                           (`chime certs`); give clients --ca (or CHIME_CA)
#                           $CHIME_CLUSTER_DIR/secrets/tls/ca.pem
#
# Only processes whose pid file this script wrote are signalled, and only
# after /proc/PID/cmdline shows they still are that node's `chime serve`.
set -euo pipefail
shopt -s nullglob

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dir=${CHIME_CLUSTER_DIR:-$root/.cluster}
[[ $dir == /* ]] || dir=$PWD/$dir
base_port=${CHIME_BASE_PORT:-7070}
gossip_base=${CHIME_GOSSIP_BASE_PORT:-7946}
ready_timeout=${CHIME_READY_TIMEOUT:-60}
stop_timeout=15
bin=$dir/bin/chime
tls=${CHIME_TLS:-0}
[[ $tls == 0 || $tls == 1 ]] || { echo "cluster.sh: CHIME_TLS must be 0 or 1, got '$tls'" >&2; exit 1; }
scheme=http
((tls)) && scheme=https
tls_dir=$dir/secrets/tls

die() {
	echo "cluster.sh: $*" >&2
	exit 1
}

# help prints the comment block at the top of this file.
help() {
	awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"
}

# usage reports a malformed command line: usage SYNOPSIS.
usage() {
	echo "usage: $0 $1 (see '$0 help')" >&2
	exit 2
}

for v in base_port gossip_base ready_timeout; do
	[[ ${!v} =~ ^[0-9]+$ ]] || die "$v must be a whole number, got '${!v}'"
done

# index checks that $1 is a node index (1, 2, …).
index() {
	[[ ${1:-} =~ ^[1-9][0-9]*$ ]] || die "node index must be 1, 2, …; got '${1:-}'"
}

http_port() { echo $((base_port + $1 - 1)); }
gossip_port() { echo $((gossip_base + $1 - 1)); }
node_dir() { echo "$dir/n$1"; }

# size prints the number of nodes `up` (or `start`) recorded.
size() {
	if [[ -s $dir/size ]]; then cat "$dir/size"; else echo 0; fi
}

# indices prints the index of every node directory, in numeric order.
indices() {
	local d i
	for d in "$dir"/n*/; do
		i=${d%/}
		i=${i##*/n}
		[[ $i =~ ^[1-9][0-9]*$ ]] && echo "$i"
	done | sort -n
}

# is_node PID I succeeds when PID is node I's `chime serve`: its command line
# names chime, serve and node I's data directory. A zombie has an empty
# command line, so a killed but unreaped node counts as gone.
is_node() {
	local pid=$1 i=$2 cmdline
	[[ $pid =~ ^[0-9]+$ ]] || return 1
	if [[ -d /proc/self ]]; then
		cmdline=$(tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline") || return 1
	else
		cmdline="$(ps -p "$pid" -o command= 2>/dev/null) " || return 1
	fi
	[[ $cmdline == *chime*" serve "* && $cmdline == *" --data-dir $(node_dir "$i")/data "* ]]
}

# live_pid I prints node I's pid and succeeds when it is running.
live_pid() {
	local f pid
	f=$(node_dir "$1")/pid
	[[ -s $f ]] || return 1
	pid=$(<"$f")
	is_node "$pid" "$1" || return 1
	echo "$pid"
}

# signal I SIG sends SIG to node I if it is running.
signal() {
	local pid
	pid=$(live_pid "$1") || return 1
	kill -s "$2" "$pid" 2>/dev/null
}

# wait_gone SECONDS I… waits until none of the nodes runs; it fails when
# some still do after SECONDS.
wait_gone() {
	local deadline=$((SECONDS + $1)) i
	shift
	for i in "$@"; do
		while live_pid "$i" >/dev/null; do
			((SECONDS < deadline)) || return 1
			sleep 0.1
		done
	done
}

# http_status PORT PATH prints the status code of GET PATH on loopback, or
# 000 when nothing answers.
http_status() {
	local code=
	if ((tls)); then
		code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 --cacert "$tls_dir/ca.pem" "https://127.0.0.1:$1$2") || true
	elif command -v curl >/dev/null; then
		code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "http://127.0.0.1:$1$2") || true
	else
		# shellcheck disable=SC2016 # $1, $2 expand in the inner shell
		code=$(timeout 3 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1" || exit
			printf "GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n" "$2" >&3
			read -r _ c _ <&3 && printf %s "$c"' _ "$1" "$2" 2>/dev/null) || true
	fi
	echo "${code:-000}"
}

# port_busy PORT succeeds when something accepts TCP connections on
# 127.0.0.1:PORT.
port_busy() {
	(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# check_ports I… fails when a node's HTTP or gossip port is taken, before
# anything is started.
check_ports() {
	local i p
	for i in "$@"; do
		for p in "$(http_port "$i")" "$(gossip_port "$i")"; do
			if port_busy "$p"; then
				die "n$i: 127.0.0.1:$p is already in use (see CHIME_BASE_PORT, CHIME_GOSSIP_BASE_PORT)"
			fi
		done
	done
}

build() {
	mkdir -p "$dir/bin"
	if [[ -n ${CHIME_BIN:-} ]]; then
		[[ -x $CHIME_BIN ]] || die "CHIME_BIN=$CHIME_BIN is not an executable file"
		# A copy: the pid files' check reads the binary's path in cmdline.
		cp -f "$CHIME_BIN" "$bin.tmp" && mv -f "$bin.tmp" "$bin"
		return
	fi
	echo "cluster.sh: building $bin" >&2
	(cd "$root" && go build -o "$bin" ./cmd/chime)
}

# secrets gives the nodes the cluster secret and gossip key (a node in a
# cluster refuses to start without them): the caller's, if it set any of
# them, else a random pair made on first use in $dir/secrets, passed as
# files through the environment.
secrets() {
	if [[ -n ${CHIME_CLUSTER_SECRET:-}${CHIME_CLUSTER_SECRET_FILE:-}${CHIME_GOSSIP_KEY:-}${CHIME_GOSSIP_KEY_FILE:-} ]]; then
		return 0
	fi
	local s=$dir/secrets
	if [[ ! -s $s/cluster-secret || ! -s $s/gossip-key ]]; then
		mkdir -p "$s"
		chmod 700 "$s"
		(
			umask 077
			head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$s/cluster-secret"
			head -c 32 /dev/urandom | base64 >"$s/gossip-key"
		)
	fi
	export CHIME_CLUSTER_SECRET_FILE=$s/cluster-secret CHIME_GOSSIP_KEY_FILE=$s/gossip-key
}

# tls_args I prints node I's TLS flags (CHIME_TLS=1), making the development
# CA and the node's certificate on first use.
tls_args() {
	((tls)) || return 0
	if [[ ! -s $tls_dir/n$1.pem || ! -s $tls_dir/n$1-key.pem ]]; then
		"$bin" certs --dir "$tls_dir" --name "n$1" --host 127.0.0.1,localhost >/dev/null
	fi
	echo "--tls-cert $tls_dir/n$1.pem --tls-key $tls_dir/n$1-key.pem --tls-ca $tls_dir/ca.pem --tls-mutual"
}

# join_list I N prints the gossip addresses of nodes 1..N except I, comma
# separated.
join_list() {
	local j out=
	for ((j = 1; j <= $2; j++)); do
		((j == $1)) || out+=${out:+,}127.0.0.1:$(gossip_port "$j")
	done
	echo "$out"
}

# launch I N starts node I of an N-node cluster in its own session and
# records its pid; it does not wait for the node to be ready.
launch() {
	local i=$1 n=$2 d pid join extra=() args
	d=$(node_dir "$i")
	if pid=$(live_pid "$i"); then
		die "n$i is already running (pid $pid)"
	fi
	secrets
	read -r -a extra <<<"${CHIME_SERVE_ARGS:-}"
	args=(serve --name "n$i" --http-addr "127.0.0.1:$(http_port "$i")"
		--gossip-addr "127.0.0.1:$(gossip_port "$i")" --data-dir "$d/data")
	join=$(join_list "$i" "$n")
	[[ -z $join ]] || args+=(--join "$join")
	local tlsflags=()
	read -r -a tlsflags <<<"$(tls_args "$i")"
	args+=(${tlsflags[@]+"${tlsflags[@]}"} ${extra[@]+"${extra[@]}"})
	mkdir -p "$d/data"
	rm -f "$d/pid"
	printf '=== %s cluster.sh: %s %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$bin" "${args[*]}" >>"$d/log"
	local detach=(setsid)
	command -v setsid >/dev/null || detach=(nohup)
	# The inner shell writes its own pid, then execs chime under that pid.
	# shellcheck disable=SC2016 # $$ and $1 expand in the inner shell
	"${detach[@]}" bash -c 'echo $$ >"$1.tmp" && mv "$1.tmp" "$1" && shift && exec "$@"' \
		chime-node "$d/pid" "$bin" "${args[@]}" </dev/null >>"$d/log" 2>&1 &
	local tries
	for ((tries = 0; tries < 100; tries++)); do
		[[ -s $d/pid ]] && return 0
		sleep 0.05
	done
	die "n$i: no pid file after 5 s; see $d/log"
}

# fail_node I MESSAGE reports a node that did not come up, with its log.
fail_node() {
	local log
	log=$(node_dir "$1")/log
	echo "cluster.sh: n$1: $2; the last lines of $log:" >&2
	tail -n 30 "$log" >&2 || true
	local j
	for j in $(indices); do
		if live_pid "$j" >/dev/null; then
			echo "cluster.sh: other nodes are still running; '$0 down' stops them" >&2
			break
		fi
	done
	exit 1
}

# wait_ready I… waits until every node's /readyz answers 200, failing fast
# when a node exits.
wait_ready() {
	local deadline=$((SECONDS + ready_timeout)) i
	for i in "$@"; do
		while true; do
			live_pid "$i" >/dev/null || fail_node "$i" "exited before /readyz answered 200"
			[[ $(http_status "$(http_port "$i")" /readyz) == 200 ]] && break
			((SECONDS < deadline)) || fail_node "$i" "/readyz did not answer 200 within ${ready_timeout}s"
			sleep 0.2
		done
	done
}

print_node() {
	echo "n$1 $scheme://127.0.0.1:$(http_port "$1") 127.0.0.1:$(gossip_port "$1")"
}

cmd_up() {
	[[ $# == 1 ]] || usage "up N"
	index "$1"
	local n=$1 i pid all=()
	for i in $(indices); do
		if pid=$(live_pid "$i"); then
			die "n$i is running (pid $pid) in $dir; run '$0 down' first"
		fi
	done
	for ((i = 1; i <= n; i++)); do
		all+=("$i")
	done
	check_ports "${all[@]}"
	build
	echo "$n" >"$dir/size"
	for i in "${all[@]}"; do
		launch "$i" "$n"
	done
	wait_ready "${all[@]}"
	for ((i = 1; i <= n; i++)); do
		print_node "$i"
	done
}

cmd_start() {
	[[ $# == 1 ]] || usage "start I"
	index "$1"
	local i=$1 n pid
	n=$(size)
	((i <= n + 1)) || die "the cluster has $n nodes; start n$((n + 1)) first"
	if pid=$(live_pid "$i"); then
		die "n$i is already running (pid $pid)"
	fi
	check_ports "$i"
	[[ -x $bin && -z ${CHIME_BIN:-} ]] || build
	((i <= n)) || n=$i
	launch "$i" "$n"
	echo "$n" >"$dir/size"
	wait_ready "$i"
	print_node "$i"
}

cmd_stop() {
	[[ $# == 1 ]] || usage "stop I"
	index "$1"
	if ! signal "$1" TERM; then
		echo "cluster.sh: n$1 is not running" >&2
		return 0
	fi
	if ! wait_gone "$stop_timeout" "$1"; then
		echo "cluster.sh: n$1 still running ${stop_timeout}s after SIGTERM; sending SIGKILL" >&2
		signal "$1" KILL || true
		wait_gone 5 "$1" || die "n$1 survived SIGKILL"
	fi
}

cmd_kill() {
	[[ $# == 1 ]] || usage "kill I"
	index "$1"
	if ! signal "$1" KILL; then
		echo "cluster.sh: n$1 is not running" >&2
		return 0
	fi
	wait_gone 5 "$1" || die "n$1 survived SIGKILL"
}

cmd_restart() {
	[[ $# == 1 ]] || usage "restart I"
	cmd_stop "$1"
	cmd_start "$1"
}

cmd_logs() {
	local follow=0 lines=
	while [[ $# -gt 1 ]]; do
		case $1 in
		-f) follow=1 ;;
		-n)
			[[ ${2:-} =~ ^[0-9]+$ ]] || die "logs: -n needs a number of lines"
			lines=$2
			shift
			;;
		*) usage "logs [-f] [-n N] I" ;;
		esac
		shift
	done
	[[ $# == 1 ]] || usage "logs [-f] [-n N] I"
	index "$1"
	local log
	log=$(node_dir "$1")/log
	[[ -f $log ]] || die "no log for n$1 at $log"
	if ((follow)); then
		exec tail -n "${lines:-10}" -F "$log"
	elif [[ -n $lines ]]; then
		tail -n "$lines" "$log"
	else
		cat "$log"
	fi
}

cmd_status() {
	[[ $# == 0 ]] || usage status
	local n i pid first=
	n=$(size)
	if ((n == 0)); then
		echo "no cluster in $dir"
		return 0
	fi
	for ((i = 1; i <= n; i++)); do
		if pid=$(live_pid "$i"); then
			local ready=not-ready
			[[ $(http_status "$(http_port "$i")" /readyz) == 200 ]] && ready=ready
			printf '%-3s %-5s %-8s %-6s %-9s %s\n' "$i" "n$i" "$pid" alive "$ready" "$scheme://127.0.0.1:$(http_port "$i")"
			first=${first:-$i}
		else
			printf '%-3s %-5s %-8s %-6s %-9s %s\n' "$i" "n$i" - dead - "$scheme://127.0.0.1:$(http_port "$i")"
		fi
	done
	[[ -n $first ]] || return 0
	echo
	local ca=()
	((tls)) && ca=(--ca "$tls_dir/ca.pem")
	"$bin" cluster status --addr "$scheme://127.0.0.1:$(http_port "$first")" ${ca[@]+"${ca[@]}"}
}

cmd_down() {
	local wipe=0
	case $# in
	0) ;;
	1)
		[[ $1 == --wipe ]] || usage "down [--wipe]"
		wipe=1
		;;
	*) usage "down [--wipe]" ;;
	esac
	local i running=()
	for i in $(indices); do
		signal "$i" TERM && running+=("$i")
	done
	if ((${#running[@]})); then
		if ! wait_gone "$stop_timeout" "${running[@]}"; then
			for i in "${running[@]}"; do
				if signal "$i" KILL; then
					echo "cluster.sh: n$i still running ${stop_timeout}s after SIGTERM; sent SIGKILL" >&2
				fi
			done
			wait_gone 5 "${running[@]}" || die "a node survived SIGKILL; not wiping"
		fi
		printf 'stopped'
		printf ' n%s' "${running[@]}"
		echo
	else
		echo "no node running"
	fi
	if ((wipe)); then
		local d
		for i in $(indices); do
			d=$(node_dir "$i")
			rm -rf "$d/data"
			rm -f "$d/log" "$d/pid" "$d/pid.tmp"
			rmdir "$d" 2>/dev/null || true
		done
		rm -f "$dir/size"
		rm -rf "$dir/secrets"
		echo "wiped the nodes' data, logs and secrets in $dir"
	fi
}

[[ $# -ge 1 ]] || usage "up|status|start|stop|kill|restart|logs|down …"
cmd=$1
shift
case $cmd in
up | status | start | stop | kill | restart | logs | down) "cmd_$cmd" "$@" ;;
-h | --help | help) help ;;
*)
	echo "cluster.sh: unknown command '$cmd'" >&2
	usage "up|status|start|stop|kill|restart|logs|down …"
	;;
esac
