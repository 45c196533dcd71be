# groupd — the two commands a newcomer needs are `make run` and `make test`.
SHELL := /bin/bash
SWIFT ?= swift
CONFIG ?= groupd.yaml
RELEASE_BIN := .build/release/groupd
DEBUG_BIN := .build/debug/groupd

.PHONY: deps build release run test test-swift test-interop protos protos-check bench bench-scale clean

## deps: install the missing apt and pip packages (idempotent)
deps:
	@scripts/install-deps.sh

## build: debug build of everything, tests included
build: deps
	$(SWIFT) build --build-tests

## release: optimised server binary
release: deps
	$(SWIFT) build -c release --product groupd

## run: build, write a demo config if none exists, start groupd on the embedded SQLite store
run: release
	@if [ ! -f $(CONFIG) ]; then $(RELEASE_BIN) demo-config > $(CONFIG) && echo "wrote $(CONFIG) with a demo app"; fi
	@$(RELEASE_BIN) quickstart --config $(CONFIG)
	exec $(RELEASE_BIN) serve --config $(CONFIG)

## test: every test: Swift Testing suites, then the grpcio/h2 interop tests against a real groupd
test: build test-swift test-interop

test-swift:
	$(SWIFT) test --skip-build

test-interop:
	GROUPD_BIN=$(DEBUG_BIN) python3 -m pytest -q tests

## protos: regenerate the protobuf-c C and the Swift message types from Protos/
protos: deps
	python3 scripts/genproto.py

protos-check: deps
	python3 scripts/genproto.py --check

## bench: h2load against Health/Check and GetGroupsInfo, server on core 0, h2load on core 1
bench: release
	scripts/bench.sh $(RELEASE_BIN)

## bench-scale: member-list pages of a 100,000-member group, GetGroupsInfo at 1,000 vs 1,000,000
## groups, join throughput (server on core 0, the Python load on core 1; takes several minutes)
bench-scale: release
	taskset -c 1 python3 scripts/bench_scale.py $(RELEASE_BIN)

clean:
	rm -rf .build
