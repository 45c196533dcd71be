#!/usr/bin/env bash
# make bench-rpc: h2load against groupd's Health/Check and GroupService/GetGroupsInfo.
# The server runs on core 0 (taskset -c 0), h2load on core 1 with one thread, loopback only,
# each load bounded in time. Prints one table row per method and concurrency level.
#   scripts/bench.sh .build/release/groupd        (DUR=10 seconds per level by default)
set -euo pipefail
BIN=${1:-.build/release/groupd}
DUR=${DUR:-10}
LEVELS=${LEVELS:-"1x1 8x32"}
work=$(mktemp -d /tmp/groupd-bench.XXXXXX)
port=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
python3 - "$work" "$port" <<'PY'
import sys
sys.path.insert(0, "tests")
from support import CONFIG_TEMPLATE, APP_ID, APP_SECRET, OTHER_APP_ID, OTHER_APP_SECRET
work, port = sys.argv[1], sys.argv[2]
open(f"{work}/groupd.yaml", "w").write(CONFIG_TEMPLATE.format(
    port=port, data_dir=f"{work}/data", max_message_bytes=4194304,
    app=APP_ID, secret=APP_SECRET, other_app=OTHER_APP_ID, other_secret=OTHER_APP_SECRET))
PY
taskset -c 0 "$BIN" serve --config "$work/groupd.yaml" > "$work/groupd.log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 100); do (echo > /dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.1; done
python3 scripts/bench_prepare.py "$port" "$work" 1000
token=$(cat "$work/token")

echo "machine: $(nproc) cores, $(uname -r), $(h2load --version | head -1)"
echo "server: taskset -c 0; h2load: taskset -c 1 -t 1 -D $DUR --warm-up-time 1"
printf '| method | c×m | req/s | p50 µs | p90 µs | p99 µs | failed | grpc-status |\n|---|---|---|---|---|---|---|---|\n'
run() {
  local name=$1 path=$2 body=$3 level=$4
  local c=${level%x*} m=${level#*x}
  local status
  # One call first, to prove the method answers grpc-status 0 (h2load sees only HTTP status).
  status=$(nghttp -v -H 'content-type: application/grpc' -H 'te: trailers' -H "authorization: Bearer $token" \
      -d "$body" "http://127.0.0.1:$port$path" 2>&1 | grep -a -o 'grpc-status: [0-9]*' | head -1 | awk '{print $2}')
  rm -f "$work/h2.log"
  taskset -c 1 timeout $((DUR + 30)) h2load -c "$c" -m "$m" -t 1 -D "$DUR" --warm-up-time 1 \
      --log-file="$work/h2.log" -d "$body" -H 'content-type: application/grpc' -H 'te: trailers' \
      -H "authorization: Bearer $token" "http://127.0.0.1:$port$path" > "$work/h2.out" 2>&1
  python3 - "$name" "$level" "$work/h2.out" "$work/h2.log" "$status" <<'PY'
import re, sys
name, level, out, log, status = sys.argv[1:6]
text = open(out).read()
rps = re.search(r"finished in [\d.]+s, ([\d.]+) req/s", text).group(1)
failed = re.search(r"requests: .* (\d+) failed", text).group(1)
lat = sorted(int(line.split()[2]) for line in open(log) if line.strip())
pct = lambda p: lat[min(len(lat) - 1, int(len(lat) * p))] if lat else 0
print(f"| {name} | {level} | {float(rps):.0f} | {pct(.5)} | {pct(.9)} | {pct(.99)} | {failed} | {status} |")
PY
}
for level in $LEVELS; do
  run "Health/Check" /grpc.health.v1.Health/Check "$work/health.bin" "$level"
done
for level in $LEVELS; do
  run "GetGroupsInfo (1 id, 1,000 groups)" /groupd.v1.GroupService/GetGroupsInfo "$work/getgroupsinfo.bin" "$level"
done
