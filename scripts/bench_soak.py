"""make bench-soak: a steady load for a long time, to see whether anything grows or slows.

  python3 scripts/bench_soak.py .build/release/groupd [--minutes 30] [--rate 400]
      [--postgres URL] [--json FILE]

The load: `--groups` Work groups of `--members` members each (30 × 10: 300 members), one
Subscribe stream per member (300 streams on 10 raw HTTP/2 connections, a process of their own),
and `--rate` calls a second (open loop: a call is started every 1/rate s whatever the others do),
80 % SendGroupMessage from a random member of a random group, 20 % reads (GetGroupsInfo of one
group, GetGroupMessages of its last 20 messages), from a second process over 4 grpcio channels.
groupd runs on core 0 (taskset), the clients on core 1.

Each minute it reports groupd's RSS at the minute's end, the calls, errors and the p50 / p99
latency of the calls started in that minute. At the end it checks that every stream received
every message sent into its member's group, exactly once and in sequence order.

Each minute also reads SQLite's heap from groupd's metrics (`groupd_store_library_memory_bytes`).

Done (the bench's verdict, printed and in the JSON): after the warm-up (the first `--warmup`
minutes) RSS stays under the ceiling, the last minute's p99 is within 1.5× of the second
minute's, no call failed and every delivery is exact. Exits 1 when any of these fails. The
ceiling follows from the configured caches (`ceiling_mib`; docs/PERFORMANCE.md, "Nothing
creeps"): what the process held after the first minute besides SQLite's heap, plus SQLite's
caches full (64 MiB for the writer, 5 × 2,000 KiB for the readers), plus 16 MiB.
"""
import argparse
import asyncio
import json
import multiprocessing
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import POSTGRES_STORE, Server, auth_md, frame, free_port, rss_kib  # noqa: E402
from bench_fanout import Connection  # noqa: E402
from support import mint_token  # noqa: E402
import grpc  # noqa: E402
from groupd.v1 import (common_pb2, event_pb2, group_pb2, group_pb2_grpc, message_pb2,  # noqa: E402
                       message_pb2_grpc)

LIMITS = {"max_members": {"work": 200, "public": 1000, "meeting": 6000, "av_chat_room": 0}}
TEXT = "a group message of sixty-four bytes, as a short chat line is...."
TOKEN_LIFETIME = 6 * 3600


def probe(pid, minute, workdir):
    """At the end of `minute` (--probe-at): 10 s of `perf record -g` into workdir/perf-<minute>.data,
    to compare where the time goes early and late (perf samples; it does not stop groupd)."""
    perf = workdir / f"perf-{minute}.data"
    subprocess.run(["perf", "record", "-q", "-g", "-p", str(pid), "-o", str(perf), "--", "sleep", "10"],
                   capture_output=True)
    return {"perf": str(perf)}


def scrape(port):
    """groupd's gauges from its Prometheus endpoint: {name: value} for the unlabelled ones."""
    import urllib.request
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    gauges = {}
    for line in text.splitlines():
        parts = line.split(" ")
        if len(parts) == 2 and not line.startswith("#") and "{" not in parts[0]:
            gauges[parts[0]] = float(parts[1])
    return gauges


def data_mib(directory):
    """The size of the SQLite files (database, WAL, index), 0 on PostgreSQL."""
    return sum(f.stat().st_size for f in Path(directory).glob("*") if f.is_file()) / 2**20


def percentile(values, share):
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * share))]


# --- the subscribers' process -------------------------------------------------------------------

class CountingConnection(Connection):
    """Decodes each message of each stream: per (stream, group), the sequences received."""

    def on_message(self, stream, message, now):
        response = event_pb2.SubscribeResponse.FromString(message[5:])
        if response.WhichOneof("item") == "message":
            stream.arrivals.append((response.message.group_id, response.message.sequence))


def subscribers(port, members, ready, stop, results):
    """Opens one Subscribe stream per member on 10 connections; on `stop`, sends back what each
    stream received: {user: {group: [sequences]}} and the users whose stream ended."""
    async def run():
        connections = [CountingConnection(port) for _ in range(10)]
        for connection in connections:
            await connection.open()
        streams = {}
        for index, user in enumerate(members):
            connection = connections[index % len(connections)]
            stream_id = connection.next_id
            connection.subscribe(mint_token(sub=user, role="user", exp_in=TOKEN_LIFETIME),
                                 frame(event_pb2.SubscribeRequest()))
            streams[user] = connection.streams[stream_id]
        for connection in connections:
            await connection.writer.drain()
        # Every stream has been answered (its response headers or a first message) before the
        # load starts: a stream counts only the messages sent after it opened.
        await asyncio.sleep(2)
        ready.set()
        while not stop.is_set():
            await asyncio.sleep(0.2)
        received = {}
        for user, stream in streams.items():
            per_group = {}
            for group, sequence in stream.arrivals:
                per_group.setdefault(group, []).append(sequence)
            received[user] = per_group
        ended = [user for user, stream in streams.items() if stream.ended]
        results.put({"received": received, "ended": ended})
        for connection in connections:
            connection.close()

    os.sched_setaffinity(0, {1})
    asyncio.run(run())


# --- the load ------------------------------------------------------------------------------------

async def load(address, groups, minutes, rate, send_share, sample, on_minute):
    admin = ("authorization", "Bearer " + mint_token(exp_in=TOKEN_LIFETIME))
    channels = [grpc.aio.insecure_channel(address) for _ in range(4)]
    messages = [message_pb2_grpc.MessageServiceStub(channel) for channel in channels]
    infos = [group_pb2_grpc.GroupServiceStub(channel) for channel in channels]
    rng = random.Random(7)
    minute_stats = []
    current = new_bucket()
    sent = {}  # group -> sequences acknowledged
    pending = set()
    counter = 0

    async def one(index, group, members):
        nonlocal current
        bucket = current
        channel = index % len(channels)
        start = time.perf_counter()
        kind = "sends"
        try:
            if rng.random() < send_share:
                sender = rng.choice(members)
                response = await messages[channel].SendGroupMessage(
                    message_pb2.SendGroupMessageRequest(group_id=group, text=TEXT, client_message_id=f"c{index}"),
                    metadata=[admin, ("x-operator-id", sender)], timeout=30)
                sent.setdefault(group, []).append(response.message.sequence)
            elif rng.random() < 0.5:
                kind = "reads"
                await infos[channel].GetGroupsInfo(group_pb2.GetGroupsInfoRequest(group_ids=[group]),
                                                   metadata=[admin], timeout=30)
            else:
                kind = "reads"
                await messages[channel].GetGroupMessages(
                    message_pb2.GetGroupMessagesRequest(group_id=group, page_size=20), metadata=[admin], timeout=30)
            elapsed = time.perf_counter() - start
            bucket["latencies"].append(elapsed)
            bucket[kind].append(elapsed)
        except grpc.aio.AioRpcError as error:
            bucket["errors"] += 1
            code = error.code().name
            bucket["error_codes"][code] = bucket["error_codes"].get(code, 0) + 1
        bucket["calls"] += 1

    begin = time.perf_counter()
    next_minute = begin + 60
    interval = 1.0 / rate
    due = begin
    end = begin + minutes * 60
    group_ids = list(groups)
    while True:
        now = time.perf_counter()
        if now >= next_minute:
            stats = {"minute": len(minute_stats) + 1, **sample(), **summary(current),
                     "load": float(Path("/proc/loadavg").read_text().split()[0])}
            minute_stats.append(stats)
            on_minute(stats)
            current = new_bucket()
            next_minute += 60
        if now >= end:
            break
        # Open loop: every call due by now is started, however many are still in flight.
        while due <= now:
            group = rng.choice(group_ids)
            task = asyncio.ensure_future(one(counter, group, groups[group]))
            pending.add(task)
            task.add_done_callback(pending.discard)
            counter += 1
            due += interval
        await asyncio.sleep(max(0.0, min(due, next_minute) - time.perf_counter()))
    if pending:
        await asyncio.gather(*pending)
    for channel in channels:
        await channel.close()
    return minute_stats, sent


def new_bucket():
    return {"latencies": [], "sends": [], "reads": [], "calls": 0, "errors": 0, "error_codes": {}}


def summary(bucket):
    latencies = bucket["latencies"]
    return {"calls": bucket["calls"], "errors": bucket["errors"], "error_codes": bucket["error_codes"],
            "p50_ms": percentile(latencies, 0.50) * 1e3, "p99_ms": percentile(latencies, 0.99) * 1e3,
            "send_p50_ms": percentile(bucket["sends"], 0.50) * 1e3, "send_p99_ms": percentile(bucket["sends"], 0.99) * 1e3,
            "read_p50_ms": percentile(bucket["reads"], 0.50) * 1e3, "read_p99_ms": percentile(bucket["reads"], 0.99) * 1e3}


# SQLite's caches as groupd configures them (GroupStoreSQLite/SQLiteBackend.swift): the writer's
# `cache_size = -65536` (64 MiB), and the pool's 5 readers at SQLite's default -2000 (KiB) each.
SQLITE_CACHES_MIB = 64 + 5 * 2000 / 1024
# What else may grow to a bound: the verified-token cache (4,096 entries), malloc's arenas keeping
# freed memory, the event hub's per-stream queues when a stream lags.
MARGIN_MIB = 16


def ceiling_mib(first):
    """RSS may reach: what the process held at the end of the first minute that is not SQLite's
    heap, plus SQLite's caches full (SQLite only), plus the margin."""
    sqlite = first["sqlite_mib"]
    if sqlite is None:
        return first["rss_mib"] + MARGIN_MIB
    return first["rss_mib"] - sqlite + SQLITE_CACHES_MIB + MARGIN_MIB


def fmt(value):
    return "–" if value is None else f"{value:.1f}"


def setup(address, groups):
    admin = auth_md(exp_in=TOKEN_LIFETIME)
    with grpc.insecure_channel(address) as channel:
        stub = group_pb2_grpc.GroupServiceStub(channel)
        for group, members in groups.items():
            stub.CreateGroup(group_pb2.CreateGroupRequest(
                group_id=group, type=common_pb2.GROUP_TYPE_WORK, owner_user_id=members[0],
                profile=common_pb2.GroupProfile(name=group),
                members=[group_pb2.InitialMember(user_id=user) for user in members[1:]]), metadata=admin)


def check_deliveries(groups, sent, received, ended):
    """Every stream of a member got every acknowledged message of its groups once, in order."""
    problems = []
    for group, members in groups.items():
        expected = sorted(sent.get(group, []))
        for user in members:
            got = received.get(user, {}).get(group, [])
            if got != expected:
                missing = len(set(expected) - set(got))
                extra = len(got) - len(set(got))
                problems.append(f"{user} in {group}: {len(got)} received of {len(expected)} "
                                f"({missing} missing, {extra} repeated, in order: {got == sorted(got)})")
    for user, per_group in received.items():
        for other in per_group:
            if other not in groups or user not in groups[other]:
                problems.append(f"{user} received messages of {other}, not one of its groups")
    problems += [f"{user}'s stream ended" for user in ended]
    return problems


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("binary")
    parser.add_argument("--minutes", type=int, default=30)
    parser.add_argument("--rate", type=int, default=400, help="calls a second, all kinds")
    parser.add_argument("--send-share", type=float, default=0.8)
    parser.add_argument("--groups", type=int, default=30)
    parser.add_argument("--members", type=int, default=10, help="members per group, owner included")
    parser.add_argument("--warmup", type=int, default=2, help="minutes before RSS is held to the ceiling")
    parser.add_argument("--ceiling-mib", type=float, default=None,
                        help="RSS ceiling after the warm-up (default: from the first minute and the caches, see ceiling_mib())")
    parser.add_argument("--postgres", help="a PostgreSQL URL: the store is PostgreSQL instead of SQLite")
    parser.add_argument("--json", help="also write the results to this file")
    parser.add_argument("--probe-at", default="", help="minutes (e.g. 1,10) at whose end SQLite's heap, malloc's "
                        "totals and 10 s of perf are taken (see probe())")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="groupd-soak-"))
    store = POSTGRES_STORE.format(url=args.postgres) if args.postgres else ""
    metrics_port = free_port()
    server = Server(Path(args.binary).resolve(), workdir, limits=LIMITS, store=store,
                    extra=f"max_connections: 1000\nmetrics: {{ host: 127.0.0.1, port: {metrics_port} }}\n")
    groups = {f"soak{g}": [f"u{g}-{m}" for m in range(args.members)] for g in range(args.groups)}
    members = [user for users in groups.values() for user in users]
    kind = "PostgreSQL" if args.postgres else "SQLite"
    print(f"soak: {kind}, {args.minutes} min, {args.rate} calls/s ({args.send_share:.0%} sends), "
          f"{len(groups)} groups × {args.members} members, {len(members)} Subscribe streams; "
          f"groupd on core 0, clients on core 1; workdir {workdir}", flush=True)
    print("| minute | RSS MiB | SQLite heap MiB | calls | errors | p50 ms | p99 ms | sends p50 / p99 ms | reads p50 / p99 ms "
          "| load average | SQLite files MiB |\n|---|---|---|---|---|---|---|---|---|---|---|", flush=True)
    server.start("full")
    os.sched_setaffinity(0, {1})
    context = multiprocessing.get_context("spawn")
    ready, stop, results = context.Event(), context.Event(), context.Queue()
    process = context.Process(target=subscribers, args=(server.port, members, ready, stop, results))
    try:
        setup(server.address, groups)
        process.start()
        if not ready.wait(120):
            raise RuntimeError("the Subscribe streams did not open")

        probe_minutes = {int(m) for m in args.probe_at.split(",") if m}

        def sample():
            gauges = scrape(metrics_port)
            sqlite = gauges.get("groupd_store_library_memory_bytes")
            return {"rss_mib": rss_kib(server.pid) / 1024, "data_mib": data_mib(workdir / "data"),
                    "sqlite_mib": None if sqlite is None else sqlite / 2**20}

        def on_minute(stats):
            if stats["minute"] in probe_minutes:
                import threading
                threading.Thread(target=lambda: stats.update(probe=probe(server.pid, stats["minute"], workdir))).start()
            print(f"| {stats['minute']} | {stats['rss_mib']:.1f} | {fmt(stats['sqlite_mib'])} | {stats['calls']:,} | "
                  f"{stats['errors']} | "
                  f"{stats['p50_ms']:.1f} | {stats['p99_ms']:.1f} | {stats['send_p50_ms']:.1f} / {stats['send_p99_ms']:.1f} | "
                  f"{stats['read_p50_ms']:.1f} / {stats['read_p99_ms']:.1f} | {stats['load']:.1f} | {stats['data_mib']:.0f} |",
                  flush=True)

        minutes, sent = asyncio.run(load(server.address, groups, args.minutes, args.rate, args.send_share,
                                         sample, on_minute))
        # Deliveries trail the acknowledgements by milliseconds; the streams are read for a
        # little longer before they are counted.
        time.sleep(5)
        stop.set()
        outcome = results.get(timeout=300)
        process.join(60)
    finally:
        if process.is_alive():
            process.kill()
        server.stop()
    problems = check_deliveries(groups, sent, outcome["received"], outcome["ended"])
    ceiling = args.ceiling_mib or ceiling_mib(minutes[0])
    after = [m["rss_mib"] for m in minutes[args.warmup:]]
    verdict = {
        "calls": sum(m["calls"] for m in minutes),
        "errors": sum(m["errors"] for m in minutes),
        "sends": sum(len(s) for s in sent.values()),
        "deliveries": sum(len(s) for r in outcome["received"].values() for s in r.values()),
        "delivery_problems": problems[:20],
        "rss_ceiling_mib": ceiling,
        "rss_max_after_warmup_mib": max(after) if after else None,
        "p99_second_minute_ms": minutes[1]["p99_ms"] if len(minutes) > 1 else None,
        "p99_last_minute_ms": minutes[-1]["p99_ms"] if minutes else None,
    }
    failures = []
    if verdict["errors"]:
        failures.append(f"{verdict['errors']} calls failed")
    if problems:
        failures.append(f"{len(problems)} streams' deliveries were not exact")
    if after and max(after) > ceiling:
        failures.append(f"RSS reached {max(after):.1f} MiB after the warm-up, above {ceiling:.0f}")
    if len(minutes) > 2 and minutes[-1]["p99_ms"] > 1.5 * minutes[1]["p99_ms"]:
        failures.append(f"last minute's p99 {minutes[-1]['p99_ms']:.1f} ms > 1.5 × the second's "
                        f"{minutes[1]['p99_ms']:.1f} ms")
    verdict["failures"] = failures
    print(f"calls {verdict['calls']:,}, errors {verdict['errors']}, sends {verdict['sends']:,}, deliveries "
          f"{verdict['deliveries']:,} ({'exact' if not problems else 'NOT exact'}); RSS after warm-up ≤ "
          f"{fmt(verdict['rss_max_after_warmup_mib'])} MiB (ceiling {ceiling:.0f}); p99 minute 2 → last: "
          f"{fmt(verdict['p99_second_minute_ms'])} → {fmt(verdict['p99_last_minute_ms'])} ms", flush=True)
    for line in problems[:20]:
        print("  " + line)
    print("PASS" if not failures else "FAIL: " + "; ".join(failures), flush=True)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps({"store": kind, "minutes": minutes, **verdict}, indent=2))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
