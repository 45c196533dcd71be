#!/usr/bin/env bash
# Builds and runs groupd's libFuzzer targets (Tests/Fuzz, docs/FUZZING.md).
#   scripts/fuzz.sh build                     build every target (and only what they use) under
#                                             ASan + UBSan (+ libFuzzer)
#   scripts/fuzz.sh run SECONDS [TARGET...]   replay Tests/Fuzz/Regressions/<target>/, then fuzz each
#                                             target for SECONDS from its committed seeds; exits 1
#                                             on a finding, 3 when a target saw no coverage
# The committed inputs are text (binary ones base64 as <name>.b64, Tests/Fuzz/corpus.py): each run
# unpacks them into a temporary directory first. New corpus entries go to a temporary directory
# (FUZZ_NEW_CORPUS to keep them elsewhere), never into Tests/Fuzz/Corpus; a crash stops the run, its
# input saved as .build-fuzz/artifacts/<target>-crash-*.
# Ends with each target's executions per second and coverage.
set -euo pipefail
cd "$(dirname "$0")/.."

SWIFT=${SWIFT:-swift}
SCRATCH=${FUZZ_SCRATCH:-.build-fuzz}
# One-time allocations LeakSanitizer cannot see a pointer to (the file says which).
export LSAN_OPTIONS="suppressions=$PWD/Tests/Fuzz/lsan.supp:print_suppressions=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
TARGETS=(FuzzDeframer FuzzProtoDecode FuzzJSON FuzzHTTP2 FuzzHTTP1 FuzzToken FuzzConfig FuzzPolicyHost)

build() {
  local started=$SECONDS
  # libFuzzer and the sanitizer runtimes ship with the Swift toolchain (its clang's compiler-rt).
  local toolchain
  toolchain=$(dirname "$(readlink -f "$(command -v "${SWIFT}c" || command -v swiftc)")")/..
  if ! compgen -G "$toolchain/lib/clang/*/lib/linux/libclang_rt.fuzzer-*.a" >/dev/null \
     && ! compgen -G "$toolchain/lib/swift/clang/lib/linux/libclang_rt.fuzzer-*.a" >/dev/null; then
    echo "error: no libFuzzer runtime (libclang_rt.fuzzer) in the Swift toolchain at $toolchain" >&2
    exit 1
  fi
  # Swift takes ASan and libFuzzer's coverage; the C (protobuf-c's generated code, the plugin ABI,
  # the fuzz plugin, the dependencies' C) takes both and UBSan, which swiftc does not offer on Linux.
  # SwiftPM gets one sanitizer, fuzzer (so it links libFuzzer's main instead of the executables'
  # own); the others are spelled out after it, in one fixed order:
  # - swiftc keeps only the last of several -sanitize= flags, and SwiftPM writes a --sanitize set
  #   of two in an order that changes from process to process, so alone the Swift code got either
  #   coverage (no ASan) or ASan (no coverage, so libFuzzer fuzzed blind);
  # - and each product below is a SwiftPM process of its own: when its order differed from the
  #   previous one's, every command line changed and everything already built was compiled again
  #   (NIO, NIOSSL, BoringSSL and the gRPC modules a second time: a third of the build's wall time).
  # Product by product: a plain `swift build` of the fuzz package builds every product of every
  # package it depends on (groupd's server, client, plugins and fixtures, swift-nio's and
  # swift-argument-parser's tools, ...), all instrumented; this builds the fuzz targets, the plugin
  # FuzzPolicyHost loads, and what they import, nothing else.
  local product
  for product in "${TARGETS[@]}" FuzzPolicyPlugin; do
    "$SWIFT" build --package-path Tests/Fuzz --scratch-path "$SCRATCH" --product "$product" \
      --sanitize=fuzzer -Xswiftc -sanitize=address,fuzzer \
      -Xcc -fsanitize=address,undefined -Xcc -fno-sanitize-recover=undefined
  done
  # Both instrumentations in the Swift code every target runs (readelf and nm from binutils).
  # Counted, not `grep -q`: under pipefail an early grep exit fails the pipe (SIGPIPE).
  local object="$SCRATCH/debug/GRPCProtocol.build/GRPCMessageFramer.swift.o" counters asan
  counters=$(readelf -SW "$object" | grep -c __sancov_cntrs || true)
  asan=$(nm "$object" | grep -c __asan_report || true)
  if [ "$counters" -eq 0 ] || [ "$asan" -eq 0 ]; then
    echo "error: $object lacks libFuzzer coverage or ASan: the Swift code was built without both" >&2
    exit 1
  fi
  echo "fuzz build: $((SECONDS - started)) s"
}

# fuzz_one TARGET SECONDS OUT: one target's regressions, then its fuzzing; what it prints goes to
# OUT, its summary line to OUT.summary. Exits 1 on a finding, 3 without coverage.
fuzz_one() {
  local target=$1 seconds=$2 out=$3
  exec >"$out" 2>&1
  local bin="$SCRATCH/debug" artifacts="$SCRATCH/artifacts"
  local log="$artifacts/$target.log" seeds="$unpacked/seeds/$target" regressions="$unpacked/regressions/$target"
  # Every input that once crashed runs first, each exactly once.
  if [ "$(python3 Tests/Fuzz/corpus.py unpack "Tests/Fuzz/Regressions/$target" "$regressions")" -gt 0 ]; then
    echo "== $target: replaying $(ls "$regressions" | wc -l) regression inputs"
    "$bin/$target" -runs=1 "$regressions"/* 2>"$log.regressions" || { cat "$log.regressions"; exit 1; }
  fi
  # Without its seeds a target starts from nothing, and its first inputs may all look alike.
  if [ "$(python3 Tests/Fuzz/corpus.py unpack "Tests/Fuzz/Corpus/$target" "$seeds")" -eq 0 ]; then
    echo "$target FAILED: no seeds in Tests/Fuzz/Corpus/$target (Tests/Fuzz/make_seeds.py writes them)"
    exit 1
  fi
  mkdir -p "$new_root/$target"
  echo "== $target: fuzzing for ${seconds}s from $(ls "$seeds" | wc -l) seeds (new inputs in $new_root/$target)"
  if ! "$bin/$target" "$new_root/$target" "$seeds" \
      -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
      -artifact_prefix="$artifacts/$target-" 2>"$log"; then
    tail -n 60 "$log"
    echo "$target FAILED: the input is in $artifacts/$target-* (see docs/FUZZING.md to make it a regression test)"
    exit 1
  fi
  # A binary without coverage feedback fuzzes blind (its status lines never show `cov:`): a broken
  # build, not a pass. The run's first lines say how many counters libFuzzer found and what it read.
  local coverage
  coverage=$( (grep -oE ' cov: [0-9]+' "$log" || true) | awk '{ if ($2 > max) max = $2 } END { print max + 0 }')
  if [ "$coverage" -eq 0 ]; then
    head -n 20 "$log"
    echo "$target: $(readelf -SW "$bin/$target" 2>/dev/null | grep -c __sancov_cntrs || true) __sancov_cntrs sections in $bin/$target"
    echo "$target FAILED: libFuzzer saw no coverage (rebuild: rm -rf $SCRATCH && $0 build)"
    exit 3
  fi
  local done_line execs units
  done_line=$(grep -E '^#[0-9]+.* cov: ' "$log" | tail -n 1 || true)
  execs=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
  units=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  printf '%-16s %8s exec/s %10s runs  %s\n' "$target" "$execs" "$units" \
    "$(echo "$done_line" | grep -oE 'cov: [0-9]+ ft: [0-9]+ corp: [0-9]+/[^ ]+' || echo 'no status line')" \
    >"$out.summary"
}

# run SECONDS [TARGET...]: the targets FUZZ_JOBS at a time (default 1; each fuzzes for SECONDS of
# wall time whatever CPU it gets), their output printed in target order as each one's turn comes.
# The first failure stops the run: the targets still running are stopped, its output printed, and
# the run exits with its status.
run() {
  local seconds=$1; shift
  local targets=("$@")
  [ ${#targets[@]} -gt 0 ] || targets=("${TARGETS[@]}")
  local jobs=${FUZZ_JOBS:-1}
  new_root=${FUZZ_NEW_CORPUS:-$(mktemp -d)}
  # The committed inputs, raw, and each target's output; global, as the EXIT trap runs after run()
  # has returned.
  unpacked=$(mktemp -d)
  trap 'rm -rf "$unpacked"' EXIT
  mkdir -p "$SCRATCH/artifacts" "$unpacked/out"
  local started=$SECONDS next=0 printed=0 target done_pid code
  declare -A running=()   # pid -> target
  declare -A finished=()  # target -> 1
  while [ "$printed" -lt ${#targets[@]} ]; do
    # Start targets up to the width.
    while [ "$next" -lt ${#targets[@]} ] && [ ${#running[@]} -lt "$jobs" ]; do
      target=${targets[$next]}
      ( fuzz_one "$target" "$seconds" "$unpacked/out/$target" ) &
      running[$!]=$target
      next=$((next + 1))
    done
    # Print, in order, every target that has ended.
    while [ "$printed" -lt ${#targets[@]} ] && [ -n "${finished[${targets[$printed]}]:-}" ]; do
      cat "$unpacked/out/${targets[$printed]}"
      printed=$((printed + 1))
    done
    [ ${#running[@]} -gt 0 ] || continue
    code=0
    wait -n -p done_pid "${!running[@]}" || code=$?
    target=${running[$done_pid]}
    unset "running[$done_pid]"
    if [ "$code" -ne 0 ]; then
      for done_pid in "${!running[@]}"; do kill -TERM "$done_pid" 2>/dev/null; pkill -TERM -P "$done_pid" 2>/dev/null; done
      wait 2>/dev/null
      cat "$unpacked/out/$target"
      exit "$code"
    fi
    finished[$target]=1
  done
  [ -n "${FUZZ_NEW_CORPUS:-}" ] || rm -rf "$new_root"
  echo "== fuzzing done in $((SECONDS - started)) s ($jobs at a time)"
  for target in "${targets[@]}"; do cat "$unpacked/out/$target.summary"; done
}

case "${1:-}" in
  build) build ;;
  run) shift; run "$@" ;;
  *) echo "usage: $0 build | run SECONDS [TARGET...]" >&2; exit 2 ;;
esac
