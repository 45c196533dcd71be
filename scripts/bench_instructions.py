"""Instructions per call, counted by callgrind (`make bench-instructions`, and a check in `make test`).

  python3 scripts/bench_instructions.py BINARY [--calls N] [--json FILE]
  python3 scripts/bench_instructions.py BINARY --check Benchmarks/instructions.json
  python3 scripts/bench_instructions.py BINARY --update Benchmarks/instructions.json
  python3 scripts/bench_instructions.py BINARY --postgres postgres://groupd@127.0.0.1:PORT/groupd ...
  python3 scripts/bench_instructions.py BINARY --config-extra "$(printf 'tracing:\n  otlp_endpoint: ...\n')"

groupd runs under `valgrind --tool=callgrind` on a fresh SQLite store (durability full), or with
`--postgres CLUSTER_URL` on a new database of that PostgreSQL cluster (groupd's instructions only,
not the server's); a
grpcio client in this process (outside the measured one) makes the calls one at a time, so every
write is a batch of one. Per row: a warm-up, then the counters zeroed, N calls, a dump; the row is
the instructions groupd executed (every thread) over those calls, divided by N. Unlike a rate or
CPU time, the count does not depend on what else the machine runs: two runs of one binary agree
within a fraction of a percent.

Rows: Health/Check; GetGroupsInfo of one group by id (the group cache serves it); SendGroupMessage
into one group; CreateGroup with distinct ids; JoinGroup into one Public group (join option ANY),
a distinct user per call.

The baseline file holds one entry per kind of build and store (`debug`, `release`,
`release-postgres`: a count depends on the optimizer and the backend) with the number of calls it
was counted over. `--check` counts with that number of calls
and fails (exit 1) when a row is more than 5 % above the baseline; `--update` writes the counts as
the new baseline of this build's kind (docs/PERFORMANCE.md, "Instructions per call", says when).

Two things this machine's valgrind (3.19) needs, done here:
- it cannot read the DWARF 5 the Swift toolchain writes, so groupd runs from a copy without debug
  information (`objcopy --strip-debug`);
- its `rt_sigsuspend` writes into the caller's signal mask, which libdispatch's main loop keeps in
  read-only memory, so a preloaded shim (`sigsuspend` on a copy of the mask) stands in for libc's.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from benchlib import auth_md, free_port, server_config  # noqa: E402
from support import STORE_TEMPLATE  # noqa: E402
import grpc  # noqa: E402
from grpc.health.v1 import health_pb2, health_pb2_grpc  # noqa: E402
from groupd.v1 import common_pb2, group_pb2, group_pb2_grpc, member_pb2, member_pb2_grpc  # noqa: E402
from groupd.v1 import message_pb2, message_pb2_grpc  # noqa: E402

LIMITS = {"max_members": {"work": 200, "public": 0, "meeting": 6000, "av_chat_room": 0}, "max_groups_per_user": 1000000}


SHIM = r"""
#define _GNU_SOURCE
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>
/* sigsuspend on a writable copy of the mask (see the module's docstring). */
int sigsuspend(const sigset_t *mask) {
    sigset_t copy = *mask;
    return (int)syscall(SYS_rt_sigsuspend, &copy, 8);
}
"""

TEXT = "a group message of sixty-four bytes, as a short chat line is...."
ROWS = ["health", "get_groups_info", "send_one", "create", "join"]
TITLES = {
    "health": "Health/Check",
    "get_groups_info": "GetGroupsInfo, 1 id",
    "send_one": "SendGroupMessage, one group",
    "create": "CreateGroup, distinct ids",
    "join": "JoinGroup, one Public group, distinct users",
}
TOLERANCE = 0.05
WARMUP = 20


def build_kind(binary: Path) -> str:
    """`debug` or `release`, from SwiftPM's build directory the binary sits in."""
    parts = binary.resolve().parts
    for kind in ("release", "debug"):
        if kind in parts:
            return kind
    raise SystemExit(f"cannot tell whether {binary} is a debug or a release build (its path names neither)")


class Callgrind:
    """groupd under callgrind, on a free port, in `workdir`."""

    def __init__(self, binary: Path, workdir: Path, database=None, extra=""):
        self.workdir = workdir
        self.stripped = workdir / "groupd"
        subprocess.run(["objcopy", "--strip-debug", str(binary), str(self.stripped)], check=True)
        shim_source = workdir / "sigsuspend_shim.c"
        shim_source.write_text(SHIM)
        self.shim = workdir / "sigsuspend_shim.so"
        compiler = shutil.which("cc") or shutil.which("clang")  # the Swift toolchain brings clang
        if not compiler:
            raise SystemExit("no C compiler (cc or clang) for the sigsuspend shim")
        subprocess.run([compiler, "-shared", "-fPIC", "-O2", "-o", str(self.shim), str(shim_source)], check=True)
        self.port = free_port()
        config = workdir / "groupd.yaml"
        text = server_config(self.port, workdir / "data", limits=LIMITS,
                             store=STORE_TEMPLATE.format(url=database) if database else "")
        if extra and not extra.endswith("\n"):
            extra += "\n"
        config.write_text(text.replace("apps:\n", extra + "apps:\n", 1))
        env = dict(os.environ, LD_PRELOAD=str(self.shim), SWIFT_DETERMINISTIC_HASHING="1")
        self.out = workdir / "callgrind.out"
        self.process = subprocess.Popen(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={self.out}", "--dump-instr=no",
             "--dump-line=no", "--compress-strings=no", str(self.stripped), "serve", "--config", str(config)],
            env=env, stdout=open(workdir / "groupd.log", "ab"), stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 180
        while True:
            if self.process.poll() is not None:
                raise SystemExit(f"groupd under callgrind exited ({self.process.returncode}); see {workdir}/groupd.log")
            try:
                with grpc.insecure_channel(self.address) as channel:
                    grpc.channel_ready_future(channel).result(timeout=1)
                    break
            except grpc.FutureTimeoutError:
                if time.monotonic() > deadline:
                    raise SystemExit(f"groupd under callgrind did not listen within 180 s; see {workdir}/groupd.log")

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def control(self, *arguments) -> None:
        subprocess.run(["callgrind_control", *arguments, str(self.process.pid)], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120)

    def count(self, calls, keep=None) -> int:
        """Instructions groupd executes while `calls()` runs: counters zeroed, then dumped (the dump
        copied to `keep` when given)."""
        self.control("--zero")
        calls()
        before = set(self.workdir.glob("callgrind.out*"))
        self.control("--dump")
        dumps = sorted(set(self.workdir.glob("callgrind.out*")) - before, key=lambda p: p.stat().st_mtime)
        if not dumps:
            raise SystemExit("callgrind wrote no dump")
        if keep:
            shutil.copyfile(dumps[-1], keep)
        text = dumps[-1].read_text(errors="replace")
        match = re.search(r"^(?:summary|totals):\s+(\d+)", text, re.M)
        if not match:
            raise SystemExit(f"no instruction total in {dumps[-1]}")
        return int(match.group(1))

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=120)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def measure(binary: Path, calls: int, cluster_url=None, profiles=None, extra="") -> dict:
    workdir = Path(tempfile.mkdtemp(prefix="groupd-instructions-"))
    database = None
    if cluster_url:
        sys.path.insert(0, str(ROOT / "scripts"))
        from pg_cluster import PostgresCluster

        database = PostgresCluster.attach(cluster_url).create_database()
    server = Callgrind(binary, workdir, database, extra)
    md = auth_md()
    results = {}
    try:
        with grpc.insecure_channel(server.address) as channel:
            health = health_pb2_grpc.HealthStub(channel)
            groups = group_pb2_grpc.GroupServiceStub(channel)
            members = member_pb2_grpc.MemberServiceStub(channel)
            messages = message_pb2_grpc.MessageServiceStub(channel)
            groups.CreateGroup(group_pb2.CreateGroupRequest(
                group_id="hot", type=common_pb2.GROUP_TYPE_PUBLIC, owner_user_id="sender",
                profile=common_pb2.GroupProfile(name="hot")), metadata=md)
            groups.CreateGroup(group_pb2.CreateGroupRequest(
                group_id="open", type=common_pb2.GROUP_TYPE_PUBLIC, owner_user_id="owner",
                profile=common_pb2.GroupProfile(name="open"),
                settings=common_pb2.GroupSettings(join_option=common_pb2.JOIN_OPTION_ANY)), metadata=md)
            numbers = {"create": 0, "join": 0}

            def call(row):
                if row == "health":
                    health.Check(health_pb2.HealthCheckRequest())
                elif row == "get_groups_info":
                    groups.GetGroupsInfo(group_pb2.GetGroupsInfoRequest(group_ids=["hot"]), metadata=md)
                elif row == "send_one":
                    messages.SendGroupMessage(message_pb2.SendGroupMessageRequest(group_id="hot", text=TEXT),
                                              metadata=md + [("x-operator-id", "sender")])
                elif row == "create":
                    numbers["create"] += 1
                    n = numbers["create"]
                    groups.CreateGroup(group_pb2.CreateGroupRequest(
                        group_id=f"c{n:06}", type=common_pb2.GROUP_TYPE_PUBLIC, owner_user_id=f"o{n:06}",
                        profile=common_pb2.GroupProfile(name="created")), metadata=md)
                elif row == "join":
                    numbers["join"] += 1
                    members.JoinGroup(member_pb2.JoinGroupRequest(group_id="open"),
                                      metadata=md + [("x-operator-id", f"j{numbers['join']:06}")])

            for row in ROWS:
                for _ in range(WARMUP):
                    call(row)
                keep = profiles / f"{row}.callgrind" if profiles else None
                total = server.count(lambda: [call(row) for _ in range(calls)], keep)
                results[row] = total // calls
                print(f"| {TITLES[row]} | {results[row]:,} |", flush=True)
    finally:
        server.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    return results


def above_baseline(counts: dict, baseline: dict, tolerance=TOLERANCE) -> list:
    """The rows of `counts` more than `tolerance` above `baseline` (a row the baseline lacks is
    above it: a new row needs a baseline first)."""
    return [row for row in ROWS if row not in baseline or counts[row] > baseline[row] * (1 + tolerance)]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("binary", type=Path)
    parser.add_argument("--calls", type=int, help="calls per row (default: the baseline's, else 1,000)")
    parser.add_argument("--json", help="also write the counts to this file")
    parser.add_argument("--check", type=Path, help="fail when a row is more than 5 %% above this baseline")
    parser.add_argument("--update", type=Path, help="write the counts as this build kind's baseline")
    parser.add_argument("--kind", choices=["debug", "release"],
                        help="the kind of build (default: from the binary's path, .build/debug or .build/release)")
    parser.add_argument("--postgres", metavar="CLUSTER_URL",
                        help="run groupd on a new database of this PostgreSQL cluster instead of SQLite")
    parser.add_argument("--config-extra", default="", metavar="YAML",
                        help="top-level configuration keys to add (e.g. a `tracing` section), one string")
    parser.add_argument("--profiles", type=Path,
                        help="keep each row's callgrind dump in this directory (read with callgrind_annotate)")
    args = parser.parse_args()
    if args.profiles:
        args.profiles.mkdir(parents=True, exist_ok=True)
    kind = (args.kind or build_kind(args.binary)) + ("-postgres" if args.postgres else "")
    baseline_file = args.check or args.update
    baselines = json.loads(baseline_file.read_text()) if baseline_file and baseline_file.exists() else {}
    baseline = baselines.get(kind)
    if args.check and not baseline:
        raise SystemExit(f"{args.check} has no {kind} baseline")
    calls = args.calls or (baseline["calls"] if baseline else 1000)
    print(f"{kind} {args.binary}; {calls} calls per row, one at a time, after {WARMUP} of warm-up")
    print("| row | instructions per call |\n| --- | --- |")
    counts = measure(args.binary, calls, args.postgres, args.profiles, args.config_extra)
    if args.json:
        Path(args.json).write_text(json.dumps({"kind": kind, "calls": calls, "rows": counts}, indent=2) + "\n")
    if args.update:
        baselines[kind] = {"calls": calls, "rows": counts}
        args.update.write_text(json.dumps(baselines, indent=2, sort_keys=True) + "\n")
        print(f"wrote the {kind} baseline to {args.update}")
    if args.check:
        if calls != baseline["calls"]:
            raise SystemExit(f"the {kind} baseline was counted over {baseline['calls']} calls per row, not {calls}")
        failed = above_baseline(counts, baseline["rows"])
        for row in ROWS:
            change = counts[row] / baseline["rows"][row] - 1
            verdict = "ABOVE" if row in failed else "ok"
            print(f"{TITLES[row]}: {counts[row]:,} against {baseline['rows'][row]:,} ({change:+.1%}) {verdict}")
        if failed:
            print(f"{len(failed)} row(s) more than {TOLERANCE:.0%} above the baseline: {', '.join(failed)}. "
                  "If the cost is meant, update the baseline (docs/PERFORMANCE.md, \"Instructions per call\").")
            sys.exit(1)


if __name__ == "__main__":
    main()
