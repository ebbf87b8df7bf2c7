SHELL := bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := check

GO      ?= go
PKGS    := ./...
BIN     := bin/chime

# -trimpath keeps the checkout's directory out of the build cache's keys:
# without it a fresh clone (CI) compiles every package of the module again,
# race, plain and vet variants (~100 CPU-s here), though the cache holds
# the very same sources built from another directory. File names in
# panics and test failures read as import paths. Every go command make
# runs inherits it, the builds inside tests too.
export GOFLAGS := -trimpath $(shell $(GO) env GOFLAGS)

.PHONY: help check fmt-check vet deps race-build test test-race test-race-full build run fuzz sim bench cover tidy-check

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/' | expand -t 14

check: fmt-check ## everything CI runs: gofmt, vet, import boundaries, tests with -race
	@$(MAKE) --no-print-directory -j3 vet deps race-build build
	@$(MAKE) --no-print-directory test-race

fmt-check: ## fail if gofmt would change a file
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

vet: ## go vet
	$(GO) vet $(PKGS)

deps: ## enforce the package dependency rules (STYLE.md R1)
	scripts/check-deps.sh

test: ## tests without the race detector
	$(GO) test -count=1 -timeout=15m $(PKGS)

# The tests run in groups side by side. The real-time group holds the
# tests whose checks rest on real time: real `chime` processes and their
# failover bounds (cmd/chime), the bench harness's smoke runs (a join must
# land within 3 s of fires), real sockets with deadlines; the process
# clusters of one package at a time (-p 1: the cluster tests of two
# packages beside each other starve each other's timers on 2 cores), the
# in-process tests before them two packages at a time. The rest is CPU-bound and runs on fake
# time (testing/synctest) or on no time at all, under SCHED_IDLE (chrt
# --idle 0: below any nice level; at nice 10 it still took enough of the
# CPU to stall a restarted TestChaos node for 6.5 s), so it takes only the
# CPU the processes leave idle, in two chains: node (the in-process
# clusters, the longest package) and the others after one another.
# PURE packages run one goroutine and share nothing (scripts/check-deps.sh
# checks: no go statement, no sync): the race detector has nothing to find
# in them and costs 5-9x there, so their tests run without it (slots'
# TestScale, which skips itself under -race, runs there). All must pass.
# For the same reason slots is compiled without the race detector's
# instrumentation into the other packages' race builds (NORACE): the
# ownership machine is confined to the executor's goroutine (Executor has
# no exported method but Run and Close; other goroutines see it only
# through the Board), and without atomics or locks slots carries no
# synchronisation the detector would miss elsewhere. Its per-slot loops
# were a third of node's test CPU under -race (533 -> 353 CPU-s, docs/
# BENCHMARKS.md). Only code that synchronises nothing may be listed here:
# a package whose atomics compile to plain instructions hides their
# happens-before edges and makes false races elsewhere (pebble did).
# -race also turns on the compiler's checkptr instrumentation, which checks
# every unsafe.Pointer conversion at run time; Chime imports no unsafe, so
# it checks only dependencies (pebble's arena skiplist most: 2.6 % of
# node's test CPU, docs/BENCHMARKS.md). make check turns it off
# (-d=checkptr=0, the race detector stays on); `make test-race-full`
# instruments everything, checkptr included.
# cmd/chime runs twice in the real-time group: under -race with
# CHIME_SKIP_PROCESS_TESTS set (its in-process tests), then without -race
# (all its tests): its process tests start chime binaries built without
# -race, so an instrumented test binary checks only their harness, for
# ~73 CPU-s of a make check whose CPU is its wall time (docs/BENCHMARKS.md).
# node's in-process clusters (every test that starts one: newFaultHarness)
# cost ~10x under -race, page faults in its shadow memory most (its
# system time: docs/BENCHMARKS.md), and were 93 % of node's race CPU
# (733 of 783 CPU-s measured test by test). make check runs node twice:
# under -race with only the RACE_CLUSTERS clusters (a failover, a join's
# handover, a drain's; the others skip themselves there), then all of
# node without it. Every fault scenario runs in each check; every other
# node test runs under the race detector too; make test-race-full runs
# every cluster under it.
RACE_CLUSTERS := ^TestFault(CrashOwner|Join|Leave)$$
# The real-time group's race run: bench's process clusters (REALTIME,
# -p 1; its smoke test runs its cluster subtests two at a time) after the rest (tests in one process; cmd/chime's process tests
# skip themselves there) two at a time (-p 2): one at a time, their race
# builds, links and runs took ~80 s of the group's ~200 s on 2 cores for
# ~50 CPU-s; two at a time 37 s. cmd/chime's process tests run after,
# without -race, alone.
REALTIME := ./bench
FAKETIME := ./node/membership ./storage ./node/schedule
PURE     := ./slots ./ring ./wheel
MODULE   := $(shell $(GO) list -m)
NORACE   := -gcflags=all=-d=checkptr=0 '-gcflags=$(MODULE)/slots=-race=false -d=checkptr=0'
RACEFLAGS := -race $(NORACE) -count=1 -timeout=15m
TESTFLAGS := $(RACEFLAGS) -p 1

# race-build compiles every library package for the race builds, beside vet
# in make check: test-race's groups then share those objects instead of
# compiling the same packages side by side, and node, under SCHED_IDLE,
# starts its tests without first waiting for its deps.
race-build: ## compile the library packages as test-race's race builds need them
	$(GO) build -race $(NORACE) $$($(GO) list -f '{{if ne .Name "main"}}{{.ImportPath}}{{end}}' $(PKGS))

# The process tests of cmd/chime and bench/ run the bin/chime that build
# has just made from this tree (CHIME_TEST_BIN), instead of linking one
# each (5-20 s apiece on a busy 2-core box).
test-race: build ## tests with the race detector (the pure packages without), in groups side by side
	export CHIME_TEST_BIN=$(abspath $(BIN)); \
	( rc=0; CHIME_RACE_CLUSTERS='$(RACE_CLUSTERS)' chrt --idle 0 $(GO) test $(TESTFLAGS) ./node || rc=$$?; \
	  chrt --idle 0 $(GO) test -count=1 -timeout=15m ./node || rc=$$?; exit $$rc ) & node=$$!; \
	( rc=0; chrt --idle 0 $(GO) test $(TESTFLAGS) $(FAKETIME) || rc=$$?; \
	  chrt --idle 0 $(GO) test -p 1 -count=1 -timeout=15m $(PURE) || rc=$$?; exit $$rc ) & side=$$!; \
	rc=0; CHIME_SKIP_PROCESS_TESTS=1 $(GO) test $(RACEFLAGS) -p 2 $$($(GO) list $(PKGS) | grep -vxF -f <($(GO) list ./node $(FAKETIME) $(PURE) $(REALTIME))) || rc=$$?; \
	CHIME_SKIP_PROCESS_TESTS=1 $(GO) test $(TESTFLAGS) $(REALTIME) || rc=$$?; \
	$(GO) test -p 1 -count=1 -timeout=15m ./cmd/chime || rc=$$?; \
	wait $$node || rc=$$?; \
	wait $$side || rc=$$?; \
	exit $$rc

test-race-full: ## every package under the race detector, slots instrumented too (not part of check: node alone takes 1.5x the CPU)
	$(GO) test -race -count=1 -timeout=30m $(PKGS)

build: ## build bin/chime
	$(GO) build -o $(BIN) ./cmd/chime

run: build ## run one node with ./chime-data
	$(BIN) serve

FUZZ_TARGETS := ./wheel:FuzzWheel ./ring:FuzzAssign ./ring/gossip:FuzzDecodeMeta ./ring/gossip:FuzzDecodeMessage \
	./storage:FuzzKeyCodec ./storage:FuzzDecodeTask ./storage:FuzzDecodeExecution ./storage:FuzzApplySlotOps \
	./storage:FuzzDecodeSlotMeta ./storage:FuzzDecodeFlow ./node/httpapi:FuzzDecodeTaskRequest ./node/ownership:FuzzDecodeCtl ./node/replication:FuzzDecodeAE \
	./node/internalauth:FuzzCallAuth ./node/replication:FuzzReplicate ./node/replication:FuzzRepWire ./node/httpapi:FuzzBatchEnvelope ./node/httpapi:FuzzListCursor ./node/httpapi:FuzzSchedulePreview ./node/dispatch:FuzzRetryAfter ./client/signature:FuzzVerify
FUZZTIME ?= 30s

fuzz: ## run each fuzz target for FUZZTIME (default 30s); CI runs only their seeds
	for t in $(FUZZ_TARGETS); do \
		$(GO) test -run='^$$' -fuzz="^$${t#*:}$$" -fuzztime=$(FUZZTIME) -fuzzminimizetime=5s "$${t%%:*}"; \
	done

# make sim: the ownership machine at 1,000 nodes (slots' TestScale): bootstrap
# and two joins, no churn by default (SIM_CHURN); docs/BENCHMARKS.md has its
# cost over 4096 slots: ~16 CPU-s per simulated second, ~11 GB of RSS.
# SIM_SLOTS=16384, the real count, would need ~4x the slot state (624 B per
# slot per node: 10 GB for 1,000 nodes), more than this machine has.
SIM_NODES ?= 1000
SIM_SLOTS ?= 4096
SIM_CHURN ?= 0s

sim: ## the ownership machine at SIM_NODES (1,000) simulated nodes over SIM_SLOTS slots, joins and churn
	$(GO) test -count=1 -timeout=60m -v -run '^TestScale$$' ./slots \
		-scalenodes=$(SIM_NODES) -scaleslots=$(SIM_SLOTS) -scalechurn=$(SIM_CHURN) | grep -E '^(---|ok|FAIL|PASS)|scale_test'

bench: ## micro-benchmarks
	mkdir -p bench/out
	$(GO) test -run='^$$' -bench=. -benchmem -count=5 ./wheel ./ring ./storage ./node ./node/replication | tee bench/out/micro.txt

cover: ## coverage report
	$(GO) test -coverprofile=cover.out $(PKGS) && $(GO) tool cover -func=cover.out | tail -1

tidy-check: ## fail if go mod tidy changes go.mod/go.sum
	cp go.mod /tmp/go.mod.bak; cp go.sum /tmp/go.sum.bak
	$(GO) mod tidy
	diff -q go.mod /tmp/go.mod.bak && diff -q go.sum /tmp/go.sum.bak
