# groupd — the two commands a newcomer needs are `make run` and `make test`.
SHELL := /bin/bash
SWIFT ?= swift
CONFIG ?= groupd.yaml
RELEASE_BIN := .build/release/groupd
DEBUG_BIN := .build/debug/groupd
## Swift Testing starts every test of a run at once unless told a width. On 2 cores that left a
## plugin call or a server's answer waiting over 10 s behind hundreds of runnable threads; 8 at a
## time finish the suites in the same wall time (16-18 s here) with those waits back at their own
## length. Every `swift test` below runs with it.
export SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH ?= 8

.PHONY: deps bench-deps build-info build release release-plugins install run test test-swift test-interop test-interop-gzip test-interop-connect test-postgres test-postgres-store test-interop-postgres protos protos-check console console-check test-console bench bench-rpc bench-writes bench-crash bench-scale bench-fanout bench-catchup bench-sync bench-receipts bench-reactions bench-replies bench-topics bench-permission-groups bench-scaleout bench-instructions test-instructions docs-check bench-ecosystem bench-hostile test-sanitize bench-plugins fuzz fuzz-build fuzz-smoke clean

## deps: install the missing apt and pip packages (idempotent; skipped when GROUPD_DEPS_CHECKED is
## set, as make test does for the stages after its own deps stage)
deps:
	@[ -n "$$GROUPD_DEPS_CHECKED" ] || scripts/install-deps.sh

## bench-deps: also what the benchmarks build (C++ gRPC for the load generator and the peer)
bench-deps:
	@scripts/install-deps.sh --bench

## build-info: the git commit `groupd --version` reports, in a gitignored header rewritten only
## when the commit changes (touching the one C file that includes it, so nothing else rebuilds)
BUILD_INFO := Sources/GroupdBuildInfo/groupd_build_info.h
GIT_COMMIT ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
build-info:
	@line='#define GROUPD_GIT_COMMIT "$(GIT_COMMIT)"'; \
	if [ "$$(cat $(BUILD_INFO) 2>/dev/null)" != "$$line" ]; then \
	  echo "$$line" > $(BUILD_INFO) && touch Sources/GroupdBuildInfo/build_info.c; fi

## build: debug build of everything, tests included
build: deps build-info
	$(SWIFT) build --build-tests

## release: optimised server binary
release: deps build-info
	$(SWIFT) build -c release --product groupd

## release-plugins: the shipped policy plugins, optimised
SHIPPED_PLUGINS := ExampleCPolicy KeywordPolicy CustomFieldSchemaPolicy WebhookPolicy
release-plugins: deps
	for plugin in $(SHIPPED_PLUGINS); do $(SWIFT) build -c release --product $$plugin || exit 1; done

## install: the release binary to $(PREFIX)/bin, the shipped plugins to $(PREFIX)/lib/groupd/plugins,
## the systemd unit to $(PREFIX)/lib/systemd/system and an example config to $(PREFIX)/share/groupd,
## all under $(DESTDIR) (docs/OPERATIONS.md). BIN=path installs that binary, and the plugins next
## to it, without building (e.g. BIN=.build/debug/groupd)
PREFIX ?= /usr/local
BIN ?=
install: $(if $(BIN),,release release-plugins)
	@bin="$(or $(BIN),$(RELEASE_BIN))"; plugins="$$(dirname $$bin)"; \
	set -e; \
	install -d "$(DESTDIR)$(PREFIX)/bin" "$(DESTDIR)$(PREFIX)/lib/groupd/plugins" \
	  "$(DESTDIR)$(PREFIX)/lib/systemd/system" "$(DESTDIR)$(PREFIX)/share/groupd"; \
	install -m 0755 "$$bin" "$(DESTDIR)$(PREFIX)/bin/groupd"; \
	for plugin in $(SHIPPED_PLUGINS); do \
	  install -m 0755 "$$plugins/lib$$plugin.so" "$(DESTDIR)$(PREFIX)/lib/groupd/plugins/"; done; \
	sed 's|/usr/local/bin/groupd|$(PREFIX)/bin/groupd|g' deploy/groupd.service > "$(DESTDIR)$(PREFIX)/lib/systemd/system/groupd.service"; \
	chmod 0644 "$(DESTDIR)$(PREFIX)/lib/systemd/system/groupd.service"; \
	install -m 0644 deploy/groupd.yaml.example "$(DESTDIR)$(PREFIX)/share/groupd/groupd.yaml.example"; \
	echo "installed groupd under $(DESTDIR)$(PREFIX)"

## run: build groupd and the shipped plugins (next to it, where a config's relative plugin path
## is looked up), write a demo config if none exists, start groupd on the embedded SQLite store
run: release release-plugins
	@if [ ! -f $(CONFIG) ]; then $(RELEASE_BIN) demo-config > $(CONFIG) && echo "wrote $(CONFIG) with a demo app"; fi
	@$(RELEASE_BIN) quickstart --config $(CONFIG)
	exec $(RELEASE_BIN) serve --config $(CONFIG)

## test: every test (scripts/test.sh), ending with a table of each stage's wall time: the debug build
## (the fuzz build beside it in the idle scheduling class), the documentation build (docs-check), the
## Swift Testing suites, the store suite on PostgreSQL (test-postgres-store), then at once the grpcio/h2 interop tests on SQLite (test-interop),
## again with every grpcio channel gzip-compressed (test-interop-gzip), the contract and isolation tables
## over Connect JSON (test-interop-connect), and on two groupd nodes on
## PostgreSQL (test-interop-postgres), each pass in a port range of its own and the PostgreSQL pass
## spread over $(INTEROP_POSTGRES_WORKERS) pytest-xdist workers, and once the two short passes are
## done a short run of every fuzzer (fuzz-smoke) beside the two long ones. The parallel stages
## write to .build/test-logs/<stage>.log; a failing one's log tail is printed, and make test fails
## with its exit status.
INTEROP_POSTGRES_WORKERS ?= 2
test:
	@MAKE="$(MAKE)" FUZZ_SMOKE_SECONDS=$(FUZZ_SMOKE_SECONDS) FUZZ_JOBS=$(FUZZ_JOBS) INTEROP_POSTGRES_WORKERS=$(INTEROP_POSTGRES_WORKERS) \
	  scripts/test.sh

test-swift:
	$(SWIFT) test --skip-build

## PYTEST_FLAGS: more pytest options for the interop targets (e.g. `-n 2` for two pytest-xdist workers)
PYTEST_FLAGS ?=
test-interop:
	GROUPD_BIN=$(DEBUG_BIN) python3 -m pytest -q tests $(PYTEST_FLAGS)

## test-instructions: the debug build's instructions per call (callgrind) against the committed
## baseline, Benchmarks/instructions.json: fails when a row is more than 5 % above it
test-instructions:
	python3 scripts/bench_instructions.py $(DEBUG_BIN) --check Benchmarks/instructions.json

## docs-check: DocC builds each Swift module's documentation from the debug build (internal
## declarations included) with warnings as errors: a symbol link that names nothing, a parameter a
## comment's list leaves out (scripts/check_docs.py)
docs-check:
	python3 scripts/check_docs.py

## test-interop-gzip: the interop tests once more with channel-wide gzip on every grpcio channel
## (the generated-code and documentation-check tests, which open no channel, run once, in test-interop;
## so do the Connect, console and tracing tests, whose calls compression does not change)
test-interop-gzip:
	GROUPD_TEST_COMPRESSION=gzip GROUPD_BIN=$(DEBUG_BIN) python3 -m pytest -q tests \
	  --ignore=tests/test_protos_fresh.py --ignore=tests/test_protos_interop.py --ignore=tests/test_check_docs.py \
	  --ignore=tests/test_connect.py --ignore=tests/test_connect_client.py \
	  --ignore=tests/test_console.py --ignore=tests/test_tracing.py $(PYTEST_FLAGS)

## test-interop-connect: the contract and isolation tables once more with every stub call carried over
## the Connect protocol in JSON (GROUPD_TEST_PROTOCOL=connect: tests/connect_client.py's ConnectChannel
## instead of a grpcio channel; GROUPD_TEST_PROTOCOL=connect-proto for binary protobuf)
test-interop-connect:
	GROUPD_TEST_PROTOCOL=connect GROUPD_BIN=$(DEBUG_BIN) python3 -m pytest -q tests/test_contract.py tests/test_isolation.py \
	  $(PYTEST_FLAGS)

## test-postgres: the store conformance suite (GroupStoreTests) and the interop tests on throw-away
## PostgreSQL clusters (scripts/pg_cluster.py via scripts/with_pg_cluster.sh), the shared groupd as
## two nodes on one database; each cluster is stopped and removed whatever the outcome
test-postgres: build
	$(MAKE) --no-print-directory test-postgres-store
	$(MAKE) --no-print-directory test-interop-postgres

## test-postgres-store, test-interop-postgres: the two halves of test-postgres (no build first);
## make test runs the interop half with -n $(INTEROP_POSTGRES_WORKERS) --dist loadfile
test-postgres-store:
	scripts/with_pg_cluster.sh $(SWIFT) test --skip-build --filter GroupStoreTests

test-interop-postgres:
	GROUPD_BIN=$(DEBUG_BIN) scripts/with_pg_cluster.sh python3 -m pytest -q tests $(PYTEST_FLAGS)

## protos: regenerate the protobuf-c C and the Swift message types from Protos/
protos: deps
	python3 scripts/genproto.py
	python3 scripts/genconsole.py

protos-check: deps
	python3 scripts/genproto.py --check

## console: write Sources/GroupdConsole/ConsoleAssets.swift from the console's files in
## Sources/GroupdConsole/Assets (also run by `make protos`; tests/test_console_assets.py checks it)
console:
	python3 scripts/genconsole.py

console-check:
	python3 scripts/genconsole.py --check

## test-console: the operator console in headless Chromium and its static serving (tests/test_console.py)
test-console:
	GROUPD_BIN=$(DEBUG_BIN) python3 -m pytest -q tests/test_console.py $(PYTEST_FLAGS)

## bench: every benchmark below but the hour-long bench-soak, one after the other (figures in
## docs/PERFORMANCE.md); the scale part seeds 1,000,000 groups and takes the longest (10–30
## minutes on 2 cores)
bench: bench-instructions bench-rpc bench-ecosystem bench-hostile bench-writes bench-crash bench-fanout bench-catchup bench-receipts bench-reactions bench-replies bench-topics bench-permission-groups bench-sync bench-plugins bench-scale bench-scaleout

## bench-rpc: h2load against Health/Check and GetGroupsInfo, server on core 0, h2load on core 1
bench-rpc: release
	scripts/bench.sh $(RELEASE_BIN)

## bench-ecosystem: what TLS, gzip, the access log, metrics, Connect (JSON over HTTP/2 and HTTP/1.1)
## and tracing cost on the RPC benchmark: h2load against Health/Check, GetGroupsInfo and CreateGroup,
## every variant in turns within one run (server on core 0, h2load on core 1; about 12 minutes;
## VARIANTS=... runs some of them)
bench-ecosystem: release
	python3 scripts/bench_ecosystem.py $(RELEASE_BIN)

## bench-hostile: a good client's p50/p99 on Health/Check and GetGroupsInfo (h2load at a fixed rate)
## quiet and while each attack runs: slowloris, zero-window readers, rapid reset, a 70 KiB header
## value; with the server's peak RSS (groupd on core 0, the good client and the attacker on core 1;
## about 5 minutes)
bench-hostile: release
	python3 scripts/bench_hostile.py $(RELEASE_BIN)

## bench-writes: the write path: SendGroupMessage into one group and over 1,000 groups,
## CreateGroup, JoinGroup, GetGroupsInfo and the Subscribe catch-up, with the C++ gRPC peer's
## Health/Check and server stream measured in the same run (groupd and the peer on core 0, the C++
## load generator on core 1, durability full)
bench-writes: release bench-deps
	python3 scripts/bench_writes.py $(RELEASE_BIN)

## bench-crash: the crash test of make test with 100 SIGKILLs instead of 10 (release build): every
## acknowledged write read back, nothing duplicated, sequences without gaps
bench-crash: release
	CRASH_ROUNDS=100 GROUPD_BIN=$(RELEASE_BIN) python3 -m pytest -q -s tests/test_crash.py

## bench-scale: member-list pages of a 100,000-member group, GetGroupsInfo at 1,000 vs 1,000,000
## groups, join throughput (server on core 0, the Python load on core 1; takes several minutes)
bench-scale: release
	taskset -c 1 python3 scripts/bench_scale.py $(RELEASE_BIN)

## bench-fanout: one event to 10,000 subscribers over 100 connections (latency to the last one),
## memory per idle stream, messages/s into a 1,000-member group with 1,000 subscribers
bench-fanout: release
	python3 scripts/bench_fanout.py $(RELEASE_BIN)

## bench-catchup: a Subscribe stream resuming from a cursor, for a user in 10 groups of an app whose
## 10,000 groups wrote 10 messages each (time to caught_up; server on core 0, client on core 1;
## about 2 minutes, most of it seeding)
bench-catchup: release
	python3 scripts/bench_catchup.py $(RELEASE_BIN)

## bench-receipts: read receipts in a 200-member Work group: members marking read from 256 calls in
## flight while the sender reads GetMessageReadReceipts (calls/s, p50/p99) and counts its batched
## MESSAGE_READ_RECEIPT events, then 2,000 recalls with reads interleaved (server on core 0,
## client on core 1; under a minute)
bench-receipts: release
	python3 scripts/bench_receipts.py $(RELEASE_BIN)

## bench-reactions: AddMessageReaction and RemoveMessageReaction on a message with 10 reactions and on
## one with 10,000, in instructions per call under callgrind (scripts/bench_reactions.py; the fill
## runs natively, the measured calls one at a time; a few minutes)
bench-reactions: release
	python3 scripts/bench_reactions.py $(RELEASE_BIN)

## bench-replies: SendGroupMessage from 16 clients into one group, replies against plain messages,
## on SQLite and on PostgreSQL (scripts/bench_replies.py; a minute or two)
bench-replies: release
	python3 scripts/bench_replies.py $(RELEASE_BIN)
	scripts/with_pg_cluster.sh sh -c 'python3 scripts/bench_replies.py $(RELEASE_BIN) --postgres "$$GROUPD_TEST_POSTGRES_URL"'

## bench-topics: SendGroupMessage from 16 clients into one topic of a 100,000-member community with
## 100 topics against a Public group of the same members, and ListJoinedGroups of a member of 50
## communities x 20 topics, on SQLite and on PostgreSQL (scripts/bench_topics.py)
bench-topics: release
	python3 scripts/bench_topics.py $(RELEASE_BIN)
	scripts/with_pg_cluster.sh sh -c 'python3 scripts/bench_topics.py $(RELEASE_BIN) --postgres "$$GROUPD_TEST_POSTGRES_URL"'

## bench-permission-groups: SendGroupMessage from 16 clients into a topic decided through permission
## groups (a community holding 20 of them with values for 100 topics) against a community without
## them, on SQLite and on PostgreSQL (scripts/bench_permission_groups.py)
bench-permission-groups: release
	python3 scripts/bench_permission_groups.py $(RELEASE_BIN)
	scripts/with_pg_cluster.sh sh -c 'python3 scripts/bench_permission_groups.py $(RELEASE_BIN) --postgres "$$GROUPD_TEST_POSTGRES_URL"'

## bench-sync: SyncMembers on a 100,000-member group with 10 changes since the client's version,
## against a full reload through ListMembers; then SyncJoinedGroups for a user in 1,000 groups
## against ListJoinedGroups (server on core 0, client on core 1; about a minute)
bench-sync: release
	python3 scripts/bench_sync.py $(RELEASE_BIN)

## bench-scaleout: SQLite vs PostgreSQL (one node), and one vs two groupd nodes on one PostgreSQL
## database: the write mix and GetGroupsInfo (calls/s, groupd's and PostgreSQL's CPU per call), then
## the latency of an event from a send on one node to 10 Subscribe streams on the other (groupd and
## PostgreSQL on core 0, the load on core 1, a throw-away cluster of scripts/pg_cluster.py; about 5
## minutes; every figure also in .build/bench/scaleout-<time>.json)
bench-scaleout: release bench-deps
	python3 scripts/bench_scaleout.py $(RELEASE_BIN)

## bench-soak: a steady 400 calls/s (80 % sends, the rest reads) with a Subscribe stream per member
## (300 streams) for SOAK_MINUTES (30) on SQLite, then the same on a throw-away PostgreSQL cluster;
## each minute groupd's RSS and the p99; fails when RSS passes its ceiling after the warm-up, the
## last minute's p99 passes 1.5x the second's, a call fails or a delivery is missing (docs/PERFORMANCE.md,
## "Nothing creeps"); about an hour at the default
SOAK_MINUTES ?= 30
bench-soak: release
	python3 scripts/bench_soak.py $(RELEASE_BIN) --minutes $(SOAK_MINUTES) --json .build/bench/soak-sqlite.json
	scripts/with_pg_cluster.sh sh -c 'python3 scripts/bench_soak.py $(RELEASE_BIN) --minutes $(SOAK_MINUTES) \
	  --postgres "$$GROUPD_TEST_POSTGRES_URL" --json .build/bench/soak-postgres.json'

## test-sanitize: the policy host and the C plugins under ThreadSanitizer (many callers on one
## instance while a reload swaps it, among others), built in .build-tsan; then the transport (the
## server's and the client's HTTP/2 over nghttp2) under AddressSanitizer, built in .build-asan, then
## ConnectionTeardownTests again with LeakSanitizer on (the other suites leave embedded channels
## open, whose reference cycles it would report); the main build stays
test-sanitize: deps
	$(SWIFT) build --build-tests --sanitize=thread --scratch-path .build-tsan
	GROUPD_PLUGIN_DIR=.build-tsan/debug $(SWIFT) test --skip-build --sanitize=thread --scratch-path .build-tsan \
	  --filter 'PolicyHostTests.(ChainTests|FailureTests|ConcurrencyTests|PluginLoadingTests|PolicyConfigurationTests|ExampleCPolicyTests|PreparedChainsTests)'
	$(SWIFT) build --build-tests --sanitize=address --scratch-path .build-asan
	ASAN_OPTIONS=detect_leaks=0 \
	  $(SWIFT) test --skip-build --sanitize=address --scratch-path .build-asan --filter 'GRPCProtocolTests|GRPCServerTests|GRPCClientTests'
	LSAN_OPTIONS=suppressions=$(CURDIR)/Tests/lsan-xctest.supp:print_suppressions=0 \
	  $(SWIFT) test --skip-build --sanitize=address --scratch-path .build-asan --filter ConnectionTeardownTests

## fuzz: every libFuzzer target (Tests/Fuzz, docs/FUZZING.md) for FUZZ_SECONDS each (default 300)
## under AddressSanitizer and UBSan, from the committed seeds in Tests/Fuzz/Corpus; FUZZ_TARGETS
## picks some; new inputs go to a temporary directory (FUZZ_NEW_CORPUS=dir keeps them). Built in
## .build-fuzz. Ends with each target's executions per second and coverage.
FUZZ_SECONDS ?= 300
FUZZ_TARGETS ?=
## FUZZ_JOBS: how many targets fuzz at once (default: one per core); each fuzzes for its seconds of
## wall time whatever CPU it gets
FUZZ_JOBS ?= $(shell nproc 2>/dev/null || echo 1)
export FUZZ_JOBS
fuzz: fuzz-build
	scripts/fuzz.sh run $(FUZZ_SECONDS) $(FUZZ_TARGETS)

fuzz-build: deps
	scripts/fuzz.sh build

## fuzz-smoke: the inputs in Tests/Fuzz/Regressions replayed, then every target for
## FUZZ_SMOKE_SECONDS (default 20), FUZZ_JOBS at a time: the part of `make test`
FUZZ_SMOKE_SECONDS ?= 20
fuzz-smoke: fuzz-build
	scripts/fuzz.sh run $(FUZZ_SMOKE_SECONDS)

## bench-instructions: instructions per call of Health/Check, GetGroupsInfo, SendGroupMessage,
## CreateGroup and JoinGroup (callgrind, calls one at a time), on SQLite then on a throw-away
## PostgreSQL cluster, against the release baselines in Benchmarks/instructions.json (about 5
## minutes; how to update a baseline on purpose: docs/PERFORMANCE.md, "Instructions per call")
bench-instructions: release
	python3 scripts/bench_instructions.py $(RELEASE_BIN) --check Benchmarks/instructions.json
	scripts/with_pg_cluster.sh sh -c 'python3 scripts/bench_instructions.py $(RELEASE_BIN) \
	  --postgres "$$GROUPD_TEST_POSTGRES_URL" --check Benchmarks/instructions.json'

## bench-plugins: cost per call of no chain, an empty chain, and the keyword plugin with
## 10,000 words on a 1 KiB message (PolicyHost level, release build)
bench-plugins: deps
	$(SWIFT) build -c release --product policy-bench
	$(SWIFT) build -c release --product KeywordPolicy
	$(SWIFT) build -c release --product PolicyFixtureBehaviors
	.build/release/policy-bench .build/release

clean:
	rm -rf .build .build-tsan .build-asan .build-fuzz
