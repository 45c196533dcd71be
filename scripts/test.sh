#!/usr/bin/env bash
# `make test`: every stage of the test run, the independent ones at the same time, then a table of
# each stage's wall time. Run through make (it calls the Makefile's own targets): `make test`.
#
#   deps               the missing apt and pip packages (before anything, as apt runs one at a time)
#   build              the debug build, tests included                              } at once; the fuzz
#   fuzz-build         the libFuzzer targets in .build-fuzz, in the idle scheduling } build takes only
#                      class (SCHED_IDLE) at the lowest I/O priority                } the idle CPU
#   docs               DocC on every Swift module, warnings as errors (scripts/check_docs.py)
#   swift              the Swift Testing suites                                       alone, in turn:
#   postgres-store     GroupStoreTests on a throw-away PostgreSQL cluster             timing-sensitive
#   interop            pytest tests/ on SQLite (the console's, in headless Chromium, } at once, each with
#                      only here: about 15 s)                                       }
#   interop-gzip       the same with every grpcio channel gzip-compressed           } its own ports and
#   interop-connect    test_contract and test_isolation over Connect JSON           } PostgreSQL cluster
#   interop-postgres   pytest tests/ on two groupd nodes on PostgreSQL (own cluster) }
#                      in INTEROP_POSTGRES_WORKERS (default 2) pytest-xdist workers, whole files each
#   fuzz-smoke         regressions replayed, every fuzzer briefly, one per core at a time (once the fuzz
#                      build, interop-gzip and interop-connect are done, beside interop and
#                      interop-postgres)
#   instructions       instructions per call under callgrind against Benchmarks/instructions.json
#                      (with fuzz-smoke; a count does not depend on the load beside it)
#
# The stages in turn print to the terminal; those run at once write only to their log,
# $TEST_LOGS/<stage>.log (default .build/test-logs), and a line when they end: a failing stage's log
# tail is printed then. After a failure no further stage starts, the running ones end (the fuzz build
# is stopped: nothing would use it), the table is printed and the exit status is the failed stage's.
set -uo pipefail
cd "$(dirname "$0")/.."

MAKE=${MAKE:-make}
LOGS=${TEST_LOGS:-.build/test-logs}
FUZZ_SMOKE_SECONDS=${FUZZ_SMOKE_SECONDS:-20}
INTEROP_POSTGRES_WORKERS=${INTEROP_POSTGRES_WORKERS:-2}
postgres_flags=""
[ "$INTEROP_POSTGRES_WORKERS" -le 1 ] || postgres_flags="-n $INTEROP_POSTGRES_WORKERS --dist loadfile"
rm -rf "$LOGS" && mkdir -p "$LOGS" || exit 1

t0=$(date +%s)
stages=()                 # in the order they started
declare -A pid=() begin=() finish=() status=()
declare -A background=() stopped=()   # stages that print only to their log; stages stopped, not failed
failed=""                 # the first failed stage
failed_status=0

clock() { local s=$(( $1 )); printf '%d:%02d' $((s / 60)) $((s % 60)); }

# The short result of a stage, from its log: pytest's or Swift Testing's summary, the fuzz total.
summary() {
  local log="$LOGS/$1.log"
  [ -f "$log" ] || return 0
  case "$1" in
    interop*) grep -E '^=*[ ]*[0-9]+ (passed|failed|error)' "$log" | tail -n 1 | sed -E 's/^=+ //; s/ =+$//' ;;
    swift|postgres-store) grep -E 'Test run with [0-9]+ tests' "$log" | tail -n 1 | sed -E 's/^.*(Test run with)/\1/' ;;
    fuzz-smoke) grep -E '^== fuzzing done' "$log" | tail -n 1 | sed 's/^== //' ;;
    docs) grep -E '^check_docs:' "$log" | tail -n 1 | sed 's/^check_docs: //' ;;
    instructions) grep -cE ' ok$' "$log" | sed 's/$/ rows within 5 % of the baseline/' ;;
    *) grep -E '^Build complete|^fuzz build:' "$log" | tail -n 1 ;;
  esac
}

# start STAGE COMMAND...: in the background, output to its log only, in a process group of its own.
start() {
  local stage=$1; shift
  stages+=("$stage")
  begin[$stage]=$(date +%s)
  # The stage notes its own end and status (this shell may be busy with a stage in the foreground
  # then; and bash may have forgotten a child that ended long before it is waited for: "pid … is
  # not a child of this shell", status 127).
  setsid bash -c '"${@:2}"; code=$?; echo "$(date +%s) $code" >"$1.part"; mv "$1.part" "$1"; exit $code' \
    - "$LOGS/.$stage.end" "$@" \
    >"$LOGS/$stage.log" 2>&1 </dev/null &
  pid[$stage]=$!
  echo "== $stage: started ($(clock $((begin[$stage] - t0)))), log $LOGS/$stage.log"
}

# run STAGE COMMAND...: in the foreground, output to the terminal and its log. Returns its status.
run() {
  local stage=$1; shift
  stages+=("$stage")
  begin[$stage]=$(date +%s)
  echo "== $stage: $*"
  "$@" 2>&1 | tee "$LOGS/$stage.log"
  ended "$stage" "${PIPESTATUS[0]}"
}

# ended STAGE STATUS: records the end; on a failure (the first one counts) prints the log's tail,
# unless the stage printed to the terminal, and stops the fuzz build if it still runs.
ended() {
  local stage=$1
  local noted
  noted=$(cat "$LOGS/.$stage.end" 2>/dev/null || true)
  finish[$stage]=${noted%% *}
  [ -n "${finish[$stage]}" ] || finish[$stage]=$(date +%s)
  status[$stage]=$2
  unset "pid[$stage]"
  local took
  took=$(clock $((finish[$stage] - begin[$stage])))
  if [ "$2" -eq 0 ]; then
    echo "== $stage: passed in $took  $(summary "$stage")"
    return 0
  fi
  if [ -n "${stopped[$stage]:-}" ]; then
    echo "== $stage: stopped after $took"
    return 0
  fi
  if [ -n "${background[$stage]:-}" ]; then
    echo "== $stage: FAILED (exit $2) in $took; the end of $LOGS/$stage.log:"
    tail -n 80 "$LOGS/$stage.log" | sed "s/^/[$stage] /"
  else
    echo "== $stage: FAILED (exit $2) in $took"
  fi
  if [ -z "$failed" ]; then
    failed=$stage
    failed_status=$2
    if [ -n "${pid[fuzz-build]:-}" ]; then
      echo "== stopping fuzz-build: no stage would use it"
      stopped[fuzz-build]=1
      kill -TERM -- "-${pid[fuzz-build]}" 2>/dev/null
    fi
  fi
  return "$2"
}

# await STAGE...: waits until each named stage has ended, reporting every stage that ends meanwhile.
await() {
  local stage waiting code noted
  while :; do
    for stage in "${!pid[@]}"; do
      if [ -f "$LOGS/.$stage.end" ] || ! kill -0 "${pid[$stage]}" 2>/dev/null; then
        code=0
        wait "${pid[$stage]}" 2>/dev/null || code=$?
        # The status the stage noted, when it noted one (it did unless it was killed).
        noted=$(cat "$LOGS/.$stage.end" 2>/dev/null || true)
        [[ "$noted" == *" "* ]] && code=${noted##* }
        ended "$stage" "$code"
      fi
    done
    waiting=0
    for stage in "$@"; do [ -z "${pid[$stage]:-}" ] || waiting=1; done
    [ "$waiting" -eq 1 ] || return 0
    sleep 1
  done
}

# failures: each failed stage's failing tests by name (pytest's short summary lines, Swift Testing's
# failed tests, a fuzzer's crash), at most 20 a stage: the end of the output, which is what a CI
# page shows of a long run, names them.
failures() {
  local stage
  for stage in "${stages[@]}"; do
    [ -n "${status[$stage]:-}" ] && [ "${status[$stage]}" -ne 0 ] && [ -z "${stopped[$stage]:-}" ] || continue
    [ -f "$LOGS/$stage.log" ] || continue
    grep -E '^(FAILED|ERROR) |✘ Test .* failed|recorded an issue|^==[0-9]+== ERROR|^FAIL' "$LOGS/$stage.log" \
      | head -n 20 | cut -c 1-300 | sed "s/^/[$stage failed] /"
  done
}

table() {
  local stage total=$(( $(date +%s) - t0 )) result
  echo
  echo "== make test: stage times (wall clock; start is from the beginning of make test)"
  printf '%-18s %-14s %6s %7s  %s\n' stage result start wall summary
  for stage in "${stages[@]}"; do
    if [ -z "${status[$stage]:-}" ]; then result="unfinished"
    elif [ -n "${stopped[$stage]:-}" ]; then result="stopped"
    elif [ "${status[$stage]}" -eq 0 ]; then result="passed"
    else result="FAILED ($((status[$stage])))"; fi
    printf '%-18s %-14s %6s %7s  %s\n' "$stage" "$result" "$(clock $((begin[$stage] - t0)))" \
      "$(clock $(( ${finish[$stage]:-$(date +%s)} - begin[$stage] )))" "$(summary "$stage")"
  done
  printf '%-18s %-14s %6s %7s\n' total "$([ -z "$failed" ] && echo passed || echo "FAILED: $failed")" "" "$(clock "$total")"
  failures
  echo "(logs in $LOGS)"
}

stop_all() {
  local stage
  failed=${failed:-interrupted}
  for stage in "${!pid[@]}"; do kill -TERM -- "-${pid[$stage]}" 2>/dev/null; done
  table
  exit 130
}
trap stop_all INT TERM

go() { [ -z "$failed" ]; }

run deps "$MAKE" --no-print-directory deps
export GROUPD_DEPS_CHECKED=1   # the targets below need not check them again
if go; then
  background[fuzz-build]=1
  # SCHED_IDLE, not nice: SwiftPM starts its compiler jobs at nice 0 whatever its own niceness is,
  # but they keep the idle scheduling class.
  start fuzz-build chrt --idle 0 ionice -c 2 -n 7 "$MAKE" --no-print-directory fuzz-build
  run build "$MAKE" --no-print-directory build
fi
go && run docs "$MAKE" --no-print-directory docs-check
go && run swift "$MAKE" --no-print-directory test-swift
go && run postgres-store "$MAKE" --no-print-directory test-postgres-store
if go; then
  background[interop]=1 background[interop-gzip]=1 background[interop-connect]=1 background[interop-postgres]=1
  GROUPD_TEST_PORTS=20000-23999 start interop "$MAKE" --no-print-directory test-interop
  GROUPD_TEST_PORTS=24000-27999 start interop-gzip "$MAKE" --no-print-directory test-interop-gzip
  # One shared groupd: a few ports, below the kernel's ephemeral range (32768 on).
  GROUPD_TEST_PORTS=32000-32699 start interop-connect "$MAKE" --no-print-directory test-interop-connect
  GROUPD_TEST_PORTS=28000-31999 start interop-postgres "$MAKE" --no-print-directory test-interop-postgres \
    PYTEST_FLAGS="$postgres_flags"
fi
# The fuzzers fuzz for a fixed wall time whatever CPU they get: they start as soon as the fuzz build
# and the two short SQLite passes are done, beside the two long passes, rather than after them.
await fuzz-build interop-gzip interop-connect
if go; then
  background[fuzz-smoke]=1
  start fuzz-smoke scripts/fuzz.sh run "$FUZZ_SMOKE_SECONDS"
  background[instructions]=1
  start instructions "$MAKE" --no-print-directory test-instructions
fi
await "${!pid[@]}"

table
exit "$failed_status"
