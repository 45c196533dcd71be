"""SQLite vs PostgreSQL, and one vs two groupd nodes on one PostgreSQL database, run by
`make bench-scaleout`.

  python3 scripts/bench_scaleout.py .build/release/groupd [--seconds 8] [--latency-seconds 10]
                                    [--rate 1000] [--low-rate 200] [--subscribers 10] [--json FILE]
                                    [--workloads get,send_one,...] [--skip throughput|latency]

Everything runs in one session on this machine, loopback only, durability on both stores
(SQLite `durability: full`; PostgreSQL `fsync=on`, `synchronous_commit=on`), each load bounded in
time, on a throw-away PostgreSQL cluster of scripts/pg_cluster.py (stopped and removed at the
end, also on failure); a fresh database (or SQLite data directory) per configuration.

  1. The same workloads on three configurations: SQLite, one node; PostgreSQL, one node;
     PostgreSQL, two nodes on one database with the clients spread evenly over both (the same
     connections and calls in flight in total: two load generators, each with half):
       - GetGroupsInfo, 1 id of 1,000 groups (h2load, 8 connections x 32 streams)
       - GetGroupsInfo by a member (the group's owner), 1 id of 1,000 groups (C++ loadgen, 8 x 32)
       - SendGroupMessage into one group (C++ loadgen, 8 x 32)
       - SendGroupMessage spread over 1,000 groups (8 x 32)
       - CreateGroup, generated ids (4 x 8)
       - JoinGroup into one Public group, a distinct user per call (8 x 32)
     For each: calls/s, latency p50/p99, failed calls, and CPU per call: each groupd process's
     user+system time from /proc/PID/stat over the load (warm-up included) divided by the calls
     it answered, and PostgreSQL's: the CPU of every process of the cluster (the postmaster and
     its children, plus the children it reaped meanwhile, from its cutime/cstime) divided by
     all calls.
  2. Cross-node event latency: nodes A and B on one database; --subscribers Subscribe streams on
     node B (members of one group, one connection each, a raw HTTP/2 client that does not decode
     protobuf); a writer process sends SendGroupMessage through node A at --rate messages/s
     (open loop, paced) for --latency-seconds. Each message's text carries CLOCK_MONOTONIC in ns
     read just before its send; the receiving process reads the same clock when the bytes arrive
     (one machine, one clock). Reported: p50/p99/max over every (message, stream) and the
     latency to the last of the streams per message; then the same with writer and subscribers
     on node A, and on one SQLite node. All of it at --rate and again at --low-rate (200/s), a
     rate the PostgreSQL store keeps up with here: when it does not, the figure is queueing in
     the writes (flagged), and streams the server ends are counted with their grpc-status.

Pinning (printed by the run): groupd nodes and every PostgreSQL process on core 0 (the server
side shares one core, as groupd alone does on SQLite), the load generators, the writer and the
subscribers on core 1. With two cores, two nodes cannot run faster than one here: the two-node
rows show what a second node costs and each node's CPU per call, from which the throughput on
separate cores is projected (stated in the output).

Results: tables on stdout, every figure in a JSON file (default .build/bench/scaleout-<UTC time>.json).
The writer of part 2 is this script too (`--writer-process`, used internally).
"""
import argparse
import asyncio
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import (POSTGRES_STORE, ROOT, Server, auth_md, build_tool, cpu_seconds, frame, wait_all,  # noqa: E402
                      write_requests)
from support import mint_token  # noqa: E402
import grpc  # noqa: E402
from groupd.v1 import (common_pb2, event_pb2, group_pb2, group_pb2_grpc, member_pb2,  # noqa: E402
                       member_pb2_grpc, message_pb2, message_pb2_grpc)

SERVER_CORE, LOAD_CORE = "0", "1"

LIMITS = {"max_members": {"work": 200, "public": 0, "meeting": 6000, "av_chat_room": 0},
          "max_groups_per_user": 1000000, "max_users_per_batch": 500}

SEND = "/groupd.v1.MessageService/SendGroupMessage"
CREATE = "/groupd.v1.GroupService/CreateGroup"
JOIN = "/groupd.v1.MemberService/JoinGroup"
GET = "/groupd.v1.GroupService/GetGroupsInfo"
TEXT = "a group message of sixty-four bytes, as a short chat line is...."
MARKER = re.compile(rb"lat:(\d+):(\d+):")

# (key, label, tool, method, connections, in flight per connection)
WORKLOADS = [
    ("get", "GetGroupsInfo, 1 id of 1,000 groups", "h2load", GET, 8, 32),
    ("get_member", "GetGroupsInfo by a member, 1 id of 1,000", "loadgen", GET, 8, 32),
    ("send_one", "SendGroupMessage, one group", "loadgen", SEND, 8, 32),
    ("send_spread", "SendGroupMessage, 1,000 groups", "loadgen", SEND, 8, 32),
    ("create", "CreateGroup, generated ids", "loadgen", CREATE, 4, 8),
    ("join", "JoinGroup, one group, distinct users", "loadgen", JOIN, 8, 32),
]


def say(*parts):
    print(*parts, flush=True)


# --- CPU accounting -----------------------------------------------------------------------------

def _stat(pid):
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return fields


def postgres_cpu_seconds(postmaster):
    """CPU so far of a PostgreSQL cluster: the postmaster's own time and the time of the children it
    reaped (cutime + cstime), plus the time of its live children (backends, checkpointer, WAL
    writer, ...). A child that exits between two samples moves from the second term to the first,
    so a difference of two samples is the cluster's CPU in between."""
    tick = os.sysconf("SC_CLK_TCK")
    fields = _stat(postmaster)
    total = sum(int(fields[i]) for i in (11, 12, 13, 14))
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            child = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(child[1]) == postmaster:
            total += int(child[11]) + int(child[12])
    return total / tick


def postgres_pids(postmaster):
    pids = [postmaster]
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == postmaster:
                pids.append(int(stat.parent.name))
        except (OSError, IndexError, ValueError):
            continue
    return pids


def affinity(pid):
    """The cores `pid` may run on (none if it is gone: PostgreSQL's children come and go)."""
    try:
        return os.sched_getaffinity(pid)
    except ProcessLookupError:
        return set()


def core_busy_seconds():
    """Per core, the time it was busy so far (every process, ours or not), from /proc/stat."""
    tick = os.sysconf("SC_CLK_TCK")
    busy = {}
    for line in Path("/proc/stat").read_text().splitlines():
        if re.match(r"cpu\d+ ", line):
            name, *values = line.split()
            values = [int(v) for v in values]
            busy[name] = (sum(values[:3]) + values[5] + values[6]) / tick  # user nice system irq softirq
    return busy


def children_cpu_seconds():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


class Meter:
    """CPU of every server-side process (groupd nodes, PostgreSQL) and of this script's finished
    children (the load generators) between start() and stop()."""

    def __init__(self, nodes, postmaster):
        self.nodes, self.postmaster = nodes, postmaster

    def sample(self):
        return {"nodes": [cpu_seconds(node.pid) for node in self.nodes],
                "postgres": postgres_cpu_seconds(self.postmaster) if self.postmaster else 0.0,
                "clients": children_cpu_seconds(), "cores": core_busy_seconds(), "wall": time.monotonic()}

    def start(self):
        self.before = self.sample()

    def stop(self):
        after = self.sample()
        b = self.before
        return {"nodes": [a - x for a, x in zip(after["nodes"], b["nodes"])],
                "postgres": after["postgres"] - b["postgres"], "clients": after["clients"] - b["clients"],
                "cores": {name: after["cores"][name] - b["cores"].get(name, 0) for name in after["cores"]},
                "wall": after["wall"] - b["wall"]}


# --- loads --------------------------------------------------------------------------------------

def run_h2load(addresses, body, headers, connections, streams, seconds, workdir, meter):
    """h2load against every address at once (each with connections / len(addresses) connections),
    after an unmeasured 1 s warm-up; CPU over the measured run divided by the calls it made."""
    per = max(1, connections // len(addresses))
    workdir = Path(workdir)
    body_file = workdir / "body.bin"
    body_file.write_bytes(body)

    def command(address, duration, log):
        c = ["taskset", "-c", LOAD_CORE, "timeout", str(duration + 30), "h2load", "-c", str(per), "-m", str(streams),
             "-t", "1", "-D", str(duration), "-d", str(body_file),
             "-H", "content-type: application/grpc", "-H", "te: trailers"]
        if log:
            c.append(f"--log-file={log}")
        for header in headers:
            c += ["-H", header]
        return c + [f"http://{address}{GET}"]

    warm = [subprocess.Popen(command(a, 1, None), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for a in addresses]
    for p in warm:
        p.wait()
    logs = [workdir / f"h2-{n}.log" for n in range(len(addresses))]
    for log in logs:
        log.unlink(missing_ok=True)
    meter.start()
    procs = [subprocess.Popen(command(a, seconds, log), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for a, log in zip(addresses, logs)]
    outs = [p.communicate()[0] for p in procs]
    cpu = meter.stop()
    parts = []
    for out, log in zip(outs, logs):
        try:
            rate = float(re.search(r"finished in [\d.]+s, ([\d.]+) req/s", out).group(1))
            done = int(re.search(r"requests: \d+ total, \d+ started, (\d+) done", out).group(1))
            failed = int(re.search(r"requests: .* (\d+) failed", out).group(1))
        except AttributeError:
            raise RuntimeError(f"h2load output not understood:\n{out}")
        lat = sorted(int(line.split()[2]) for line in open(log) if line.strip())
        parts.append({"rate": rate, "calls": done, "failed": failed, "p50_us": pct(lat, .5), "p99_us": pct(lat, .99),
                      "max_us": lat[-1] if lat else 0})
    return parts, cpu


def run_loadgen(addresses, method, request_files, connections, inflight, seconds, meter, cycle=True):
    """The C++ loadgen against every address at once (connections / len(addresses) connections
    each, `inflight` calls per connection; request_files[i] for address i)."""
    per = max(1, connections // len(addresses))
    loadgen = build_tool("loadgen")
    commands = []
    for address, requests in zip(addresses, request_files):
        c = ["taskset", "-c", LOAD_CORE, str(loadgen), "--target", address, "--method", method, "--requests", str(requests),
             "--connections", str(per), "--inflight", str(inflight), "--duration", str(seconds)]
        if cycle:
            c.append("--cycle")
        commands.append(c)
    meter.start()
    procs = [subprocess.Popen(c, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for c in commands]
    outs = []
    for p in procs:
        try:
            outs.append(p.communicate(timeout=seconds + 120))
        except subprocess.TimeoutExpired:
            p.kill()
            outs.append(p.communicate())
    cpu = meter.stop()
    parts = []
    for (out, err), p in zip(outs, procs):
        if not out.strip():
            raise RuntimeError(f"loadgen failed ({p.returncode}): {err}")
        result = json.loads(out)
        parts.append({"rate": result["rate"], "calls": result["total_calls"], "failed": result["failed"],
                      "p50_us": result["p50_us"], "p99_us": result["p99_us"], "max_us": result["max_us"],
                      "codes": result["codes"], "stderr": err.strip().splitlines()[:3]})
    return parts, cpu


def pct(values, p):
    return values[min(len(values) - 1, int(len(values) * p))] if values else 0


def summarize(parts, cpu, postgres):
    """One row: the nodes' parts and the CPU of the run."""
    calls = sum(part["calls"] for part in parts)
    row = {
        "rate": sum(part["rate"] for part in parts),
        "failed": sum(part["failed"] for part in parts),
        "p50_us": max(part["p50_us"] for part in parts),
        "p99_us": max(part["p99_us"] for part in parts),
        "calls": calls,
        "per_node": parts,
        "node_cpu_us": [c / max(part["calls"], 1) * 1e6 for c, part in zip(cpu["nodes"], parts)],
        "groupd_cpu_us": sum(cpu["nodes"]) / max(calls, 1) * 1e6,
        "wall_s": cpu["wall"],
        "core0_busy": (sum(cpu["nodes"]) + cpu["postgres"]) / cpu["wall"],
        "core1_busy": cpu["clients"] / cpu["wall"],
        # Every process on each core (ours and anything else running on the machine).
        "core0_busy_all": cpu["cores"].get("cpu" + SERVER_CORE, 0) / cpu["wall"],
        "core1_busy_all": cpu["cores"].get("cpu" + LOAD_CORE, 0) / cpu["wall"],
    }
    if postgres:
        row["postgres_cpu_us"] = cpu["postgres"] / max(calls, 1) * 1e6
        row["total_cpu_us"] = row["groupd_cpu_us"] + row["postgres_cpu_us"]
    else:
        row["total_cpu_us"] = row["groupd_cpu_us"]
    for part, us in zip(parts, row["node_cpu_us"]):
        part["groupd_cpu_us"] = us
    return row


# --- set-up -------------------------------------------------------------------------------------

def seed(address, md):
    """The groups of the throughput loads: `hot` (one group), `open` (join option ANY), g0..g999."""
    with grpc.insecure_channel(address) as channel:
        groups = group_pb2_grpc.GroupServiceStub(channel)

        def create(group_id, owner, join_any=False):
            return groups.CreateGroup.future(group_pb2.CreateGroupRequest(
                group_id=group_id, type=common_pb2.GROUP_TYPE_PUBLIC, owner_user_id=owner,
                profile=common_pb2.GroupProfile(name=group_id),
                settings=common_pb2.GroupSettings(join_option=common_pb2.JOIN_OPTION_ANY) if join_any else None),
                metadata=md)

        futures = [create("hot", "sender"), create("open", "owner", join_any=True)]
        futures += [create(f"g{n}", f"s{n % 10}") for n in range(1000)]
        for future in futures:
            future.result(timeout=60)


def check_get(addresses, md):
    """One GetGroupsInfo through grpcio on each node: the h2load body must answer grpc-status 0
    (h2load sees only the HTTP status)."""
    for address in addresses:
        with grpc.insecure_channel(address) as channel:
            info = group_pb2_grpc.GroupServiceStub(channel).GetGroupsInfo(
                group_pb2.GetGroupsInfoRequest(group_ids=["g7"]), metadata=md, timeout=10)
            if len(info.groups) != 1:
                raise RuntimeError(f"GetGroupsInfo on {address}: {info}")


def request_files(workdir, md, seconds, nodes):
    """The loadgen request files; joins need distinct users, so one file per node."""
    workdir = Path(workdir)
    files = {}
    path = workdir / "get-member.bin"
    write_requests(path, [(md + [("x-operator-id", f"s{n % 10}")], group_pb2.GetGroupsInfoRequest(group_ids=[f"g{n}"]))
                          for n in range(1000)])
    files["get_member"] = [path] * nodes
    path = workdir / "send-one.bin"
    write_requests(path, [(md + [("x-operator-id", "sender")],
                           message_pb2.SendGroupMessageRequest(group_id="hot", text=TEXT))])
    files["send_one"] = [path] * nodes
    path = workdir / "send-spread.bin"
    write_requests(path, [(md + [("x-operator-id", f"s{n % 10}")],
                           message_pb2.SendGroupMessageRequest(group_id=f"g{n}", text=TEXT)) for n in range(1000)])
    files["send_spread"] = [path] * nodes
    path = workdir / "create.bin"
    write_requests(path, [(md, group_pb2.CreateGroupRequest(
        type=common_pb2.GROUP_TYPE_PUBLIC, owner_user_id=f"c{n}", profile=common_pb2.GroupProfile(name="created")))
        for n in range(1000)])
    files["create"] = [path] * nodes
    files["join"] = []
    # SQLite joins ran at about 11k/s in bench-writes: 25k per second of load leaves room.
    count = 25_000 * (seconds + 1) // nodes
    for node in range(nodes):
        path = workdir / f"join-{node}.bin"
        write_requests(path, [(md + [("x-operator-id", f"j{node}-{n}")], member_pb2.JoinGroupRequest(group_id="open"))
                              for n in range(count)])
        files["join"].append(path)
    return files


def start_nodes(binary, workdir, count, url=None):
    """`count` groupd nodes on core 0, on SQLite (url None, one node) or the PostgreSQL database
    `url`; started one after the other (the first applies the migrations)."""
    nodes = []
    store = POSTGRES_STORE.format(url=url) if url else ""
    try:
        for n in range(count):
            directory = Path(workdir) / f"node-{'ab'[n]}"
            directory.mkdir(parents=True, exist_ok=True)
            nodes.append(Server(binary, directory, core=SERVER_CORE, limits=LIMITS, store=store).start("full"))
    except BaseException:
        for node in nodes:
            node.stop()
        raise
    return nodes


def log_problems(nodes):
    """Warning and error lines of the nodes' logs (count and the first few)."""
    found = []
    for node in nodes:
        log = node.workdir / "groupd.log"
        if log.exists():
            for line in log.read_text(errors="replace").splitlines():
                if re.search(r"\b(warning|error|critical|fatal)\b", line, re.I):
                    found.append(f"{node.workdir.name}: {line[:300]}")
    return found


# --- part 1: throughput -------------------------------------------------------------------------

def throughput(name, binary, workdir, args, cluster, url, node_count, results):
    md = auth_md()
    auth = md[0]
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    nodes = start_nodes(binary, workdir, node_count, url)
    rows = {}
    try:
        seed(nodes[0].address, md)
        if url:
            # Statistics of the seeded tables, as a database in service has them (autovacuum would
            # analyze them only after its next nap, in the middle of a load or not at all).
            cluster.psql("ANALYZE", database=url.rsplit("/", 1)[1])
        addresses = [node.address for node in nodes]
        check_get(addresses, md)
        files = request_files(workdir, md, args.seconds, node_count)
        meter = Meter(nodes, cluster.pid if url else None)
        for key, label, tool, method, connections, inflight in WORKLOADS:
            if key not in args.workloads:
                continue
            if tool == "h2load":
                parts, cpu = run_h2load(addresses, frame(group_pb2.GetGroupsInfoRequest(group_ids=["g7"])),
                                        [f"{auth[0]}: {auth[1]}"], connections, inflight, args.seconds, workdir, meter)
            else:
                parts, cpu = run_loadgen(addresses, method, files[key], connections, inflight, args.seconds, meter,
                                         cycle=key != "join")
            row = summarize(parts, cpu, postgres=bool(url))
            rows[key] = row
            pg = f", postgres {row['postgres_cpu_us']:.1f} µs/call" if url else ""
            per_node = " + ".join(f"{p['rate']:,.0f}" for p in parts)
            say(f"  [{name}] {label}: {row['rate']:,.0f} calls/s"
                f"{f' ({per_node})' if node_count > 1 else ''}, p50 {row['p50_us'] / 1000:.1f} ms, "
                f"p99 {row['p99_us'] / 1000:.1f} ms, groupd "
                + " / ".join(f"{us:.1f}" for us in row["node_cpu_us"]) + f" µs/call{pg}, failed {row['failed']}, "
                f"core 0: ours {row['core0_busy']:.0%} / all {row['core0_busy_all']:.0%}, core 1: load generator(s) "
                f"{row['core1_busy']:.0%} / all {row['core1_busy_all']:.0%}")
            for part in parts:
                if part.get("stderr"):
                    say(f"      loadgen stderr: {' | '.join(part['stderr'])}")
        problems = log_problems(nodes)
        storage = None
        if url:
            # What the database holds after the loads: bytes per group (groups, members, events,
            # messages and indexes together), for the storage projection of docs/SCALING.md.
            database = url.rsplit("/", 1)[1]
            cluster.psql("VACUUM ANALYZE", database=database)
            size, groups, members, events = (int(v) for v in cluster.psql(
                "SELECT pg_database_size(current_database()), (SELECT count(*) FROM groups), "
                "(SELECT count(*) FROM members), (SELECT count(*) FROM group_events)", database=database).strip().split("|"))
            storage = {"bytes": size, "groups": groups, "members": members, "events": events,
                       "bytes_per_group": size / max(1, groups)}
            say(f"  [{name}] database: {size / 2**20:,.0f} MiB for {groups:,} groups, {members:,} members, "
                f"{events:,} events ({size / max(1, groups):,.0f} bytes per group, everything included)")
    finally:
        for node in nodes:
            node.stop()
    results[name] = {"nodes": node_count, "store": "postgres" if url else "sqlite", "rows": rows,
                     "log_problems": len(problems), "log_problem_samples": problems[:10], "storage": storage}
    if problems:
        say(f"  [{name}] {len(problems)} warning/error lines in the groupd logs, e.g.: {problems[0]}")


# --- part 2: event latency ----------------------------------------------------------------------

async def subscribe_streams(port, tokens, group):
    """One raw HTTP/2 connection and Subscribe stream per token; each stream's `arrivals` gets None
    for an item without the marker (the caught_up marker) and (message number, latency ns) for
    a marked message, the clock read when its bytes arrived."""
    import hpack
    from bench_fanout import Connection

    class LatencyConnection(Connection):
        def __init__(self, port):
            super().__init__(port)
            self.decoder = hpack.Decoder()
            self.trailers = {}

        def clock(self):
            return time.monotonic_ns()

        def on_message(self, stream, message, now):
            found = MARKER.search(message, 5)
            stream.arrivals.append((int(found.group(2)), now - int(found.group(1))) if found else None)

        def on_headers(self, stream_id, flags, block):
            # Every header block goes through the decoder (HPACK state); the trailers of a stream
            # the server ended say why (grpc-status, grpc-message).
            headers = self.decoder.decode(block)
            if flags & 0x1:
                self.streams[stream_id].ended = True
                self.trailers[stream_id] = {name: value for name, value in headers
                                            if name in ("grpc-status", "grpc-message")}

        def on_reset(self, stream_id, payload):
            self.streams[stream_id].ended = True
            self.trailers[stream_id] = {"rst_stream": int.from_bytes(payload[:4], "big")}

    request = frame(event_pb2.SubscribeRequest(group_ids=[group]))
    connections, streams = [], []
    for token in tokens:
        connection = LatencyConnection(port)
        await connection.open()
        connection.subscribe(token, request)
        connections.append(connection)
        streams.append(connection.streams[connection.next_id - 2])
    return connections, streams


async def latency_run(label, writer_node, reader_node, group, rate, args, md):
    """Subscribers on reader_node, the paced writer (a process of its own) on writer_node."""
    with grpc.insecure_channel(writer_node.address) as channel:
        group_pb2_grpc.GroupServiceStub(channel).CreateGroup(group_pb2.CreateGroupRequest(
            group_id=group, type=common_pb2.GROUP_TYPE_PUBLIC, owner_user_id="writer",
            profile=common_pb2.GroupProfile(name=group)), metadata=md, timeout=30)
        users = [f"{group}-u{n}" for n in range(args.subscribers)]
        member_pb2_grpc.MemberServiceStub(channel).InviteMembers(member_pb2.InviteMembersRequest(
            group_id=group, user_ids=users), metadata=md, timeout=30)
    tokens = [mint_token(sub=user, role="user", exp_in=3600) for user in users]
    connections, streams = await subscribe_streams(reader_node.port, tokens, group)
    try:
        if not await wait_all(streams, 1, 30, poll=0.01):
            raise RuntimeError(f"{label}: not every stream caught up")
        command = [sys.executable, str(Path(__file__).resolve()), "--writer-process", "--target", writer_node.address,
                   "--group", group, "--rate", str(rate), "--latency-seconds", str(args.latency_seconds)]
        writer = await asyncio.create_subprocess_exec(*command, stdout=asyncio.subprocess.PIPE,
                                                      stderr=asyncio.subprocess.PIPE)
        out, err = await asyncio.wait_for(writer.communicate(), args.latency_seconds + 120)
        if writer.returncode != 0 or not out.strip():
            raise RuntimeError(f"{label}: the writer failed ({writer.returncode}): {err.decode()[-2000:]}")
        sent = json.loads(out)
        expected = sent["ok"]
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if all(sum(1 for a in s.arrivals if a) >= expected for s in streams):
                break
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.2)
    finally:
        for connection in connections:
            connection.close()
    endings = {}
    for connection in connections:
        for trailer in connection.trailers.values():
            key = json.dumps(trailer, sort_keys=True)
            endings[key] = endings.get(key, 0) + 1
    all_ns, last_ns = [], {}
    received, duplicates = [], 0
    for stream in streams:
        seen = set()
        for item in stream.arrivals:
            if item is None:
                continue
            number, ns = item
            if number in seen:
                duplicates += 1
                continue
            seen.add(number)
            all_ns.append(ns)
            last_ns[number] = max(last_ns.get(number, 0), ns)
        received.append(len(seen))
    all_ns.sort()
    last = sorted(last_ns.values())
    ms = lambda ns: round(ns / 1e6, 3)  # noqa: E731
    result = {
        "label": label, "rate": rate, "writer": writer_node.address, "subscribers_on": reader_node.address,
        "subscribers": len(streams), "writer_result": sent,
        "received_per_stream_min": min(received), "received_per_stream_max": max(received),
        "lost": expected * len(streams) - sum(received), "duplicates": duplicates,
        "ended_streams": sum(stream.ended for stream in streams), "stream_endings": endings,
        # The store kept up with the writer: every send answered, within 100 ms at p99.
        "kept_up": sent["failed"] == 0 and sent["ack_p99_ms"] < 100,
        "p50_ms": ms(pct(all_ns, .5)), "p90_ms": ms(pct(all_ns, .9)), "p99_ms": ms(pct(all_ns, .99)),
        "p999_ms": ms(pct(all_ns, .999)), "max_ms": ms(all_ns[-1] if all_ns else 0),
        "mean_ms": ms(statistics.fmean(all_ns)) if all_ns else 0,
        "last_stream_p50_ms": ms(pct(last, .5)), "last_stream_p99_ms": ms(pct(last, .99)),
        "last_stream_max_ms": ms(last[-1] if last else 0),
    }
    say(f"  [{label}, {rate:,}/s] {sent['ok']:,} messages at {sent['achieved_rate']:,.0f}/s (ack p50 {sent['ack_p50_ms']:.1f} ms, "
        f"p99 {sent['ack_p99_ms']:.1f} ms, failed {sent['failed']}); to {len(streams)} streams: "
        f"p50 {result['p50_ms']:.2f} ms, p99 {result['p99_ms']:.2f} ms, max {result['max_ms']:.2f} ms "
        f"(last stream per message p99 {result['last_stream_p99_ms']:.2f} ms); lost {result['lost']}, "
        f"duplicates {duplicates}, streams ended {result['ended_streams']}"
        + (f" {endings}" if endings else "")
        + ("" if result["kept_up"] else "; the store did NOT keep up with the writer: this latency is mostly queueing"))
    if sent["failure_samples"]:
        say(f"      writer failures, e.g.: {sent['failure_samples'][0]}")
    return result


def latency(name, binary, workdir, args, url, results, where=""):
    """Cross-node (writer on A, subscribers on B) and same-node runs on PostgreSQL (url), or the
    same-node run on one SQLite node (url None); `where` is added to the labels."""
    md = auth_md()
    nodes = start_nodes(binary, workdir, 2 if url else 1, url)
    runs = {}
    try:
        for rate in args.rates:
            if url:
                runs[f"cross_node_{rate}"] = asyncio.run(latency_run(
                    f"postgres{where}, writer on A, subscribers on B", nodes[0], nodes[1], f"lat-cross-{rate}", rate,
                    args, md))
                runs[f"same_node_{rate}"] = asyncio.run(latency_run(
                    f"postgres{where}, writer and subscribers on A", nodes[0], nodes[0], f"lat-same-{rate}", rate,
                    args, md))
            else:
                runs[f"same_node_{rate}"] = asyncio.run(latency_run(
                    "sqlite, writer and subscribers on one node", nodes[0], nodes[0], f"lat-same-{rate}", rate, args, md))
        problems = log_problems(nodes)
    finally:
        for node in nodes:
            node.stop()
    results[name] = {"runs": runs, "log_problems": len(problems), "log_problem_samples": problems[:10]}
    if problems:
        say(f"  [{name}] {len(problems)} warning/error lines in the groupd logs, e.g.: {problems[0]}")


# --- the writer process -------------------------------------------------------------------------

async def writer_process(args):
    """Sends --rate messages/s for --latency-seconds into --group through --target (open loop);
    prints a JSON summary. Each text starts with `lat:<CLOCK_MONOTONIC ns>:<number>:`, the clock
    read just before the call is made."""
    md = auth_md(exp_in=3600) + [("x-operator-id", "writer")]
    total = int(args.rate * args.latency_seconds)
    acks, failures = [], []
    async with grpc.aio.insecure_channel(args.target) as channel:
        stub = message_pb2_grpc.MessageServiceStub(channel)
        for _ in range(20):  # warm the channel and the server's paths (unmarked: not measured)
            await stub.SendGroupMessage(message_pb2.SendGroupMessageRequest(group_id=args.group, text="warm-up"),
                                        metadata=md, timeout=10)

        async def send(number):
            start = time.monotonic_ns()
            text = f"lat:{start}:{number}:"
            try:
                await stub.SendGroupMessage(message_pb2.SendGroupMessageRequest(
                    group_id=args.group, text=text + TEXT[len(text):]), metadata=md, timeout=10)
                acks.append(time.monotonic_ns() - start)
            except grpc.RpcError as error:
                failures.append(f"{error.code()}: {error.details()}")

        tasks, lag = [], 0.0
        begin = time.monotonic() + 0.05
        for number in range(total):
            due = begin + number / args.rate
            delay = due - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            else:
                lag = max(lag, -delay)
            tasks.append(asyncio.ensure_future(send(number)))
        last_send = time.monotonic()
        await asyncio.gather(*tasks)
    acks.sort()
    print(json.dumps({
        "sent": total, "ok": len(acks), "failed": len(failures), "failure_samples": failures[:5],
        "achieved_rate": total / max(last_send - begin, 1e-9), "max_schedule_lag_ms": lag * 1000,
        "ack_p50_ms": pct(acks, .5) / 1e6, "ack_p99_ms": pct(acks, .99) / 1e6,
        "ack_max_ms": (acks[-1] if acks else 0) / 1e6}))


# --- report -------------------------------------------------------------------------------------

def fmt_rate(row):
    return f"{row['rate']:,.0f}" if row else "–"


def us(value):
    return f"{value:.1f}" if value is not None else "–"


def report(results, args):
    configs = results["throughput"]
    sqlite, pg1, pg2 = (configs.get(k, {}).get("rows", {}) for k in ("sqlite_1", "postgres_1", "postgres_2"))
    labels = {key: label for key, label, *_ in WORKLOADS}
    if sqlite or pg1 or pg2:
        throughput_tables(sqlite, pg1, pg2, labels)
    latency_table(results, args)


def side_by_side(labels, first, second):
    """(label, first's row, second's row, second's calls/s over first's as "1.23×" or "–") for
    each workload of `labels` that either ran."""
    for key, label in labels.items():
        a, b = first.get(key), second.get(key)
        if a or b:
            yield label, a, b, f"{b['rate'] / a['rate']:.2f}×" if a and b and a["rate"] else "–"


def throughput_tables(sqlite, pg1, pg2, labels):
    say("\n## 1. SQLite vs PostgreSQL, one node (server side on core 0)\n")
    say("| workload | SQLite calls/s | SQLite p99 ms | SQLite groupd µs/call | PostgreSQL calls/s | PostgreSQL p99 ms "
        "| PG groupd µs/call | postgres µs/call | PG total µs/call | PG/SQLite calls/s | failed (SQLite / PG) |")
    say("|---|---|---|---|---|---|---|---|---|---|---|")
    for label, s, p, ratio in side_by_side(labels, sqlite, pg1):
        say(f"| {label} | {fmt_rate(s)} | {s['p99_us'] / 1000 if s else 0:.1f} | {us(s and s['groupd_cpu_us'])} "
            f"| {fmt_rate(p)} | {p['p99_us'] / 1000 if p else 0:.1f} | {us(p and p['groupd_cpu_us'])} "
            f"| {us(p and p['postgres_cpu_us'])} | {us(p and p['total_cpu_us'])} | {ratio} "
            f"| {s['failed'] if s else '–'} / {p['failed'] if p else '–'} |")
    say("\n## 2. PostgreSQL, one node vs two nodes on one database (clients split evenly)\n")
    say("| workload | 1 node calls/s | 1 node groupd µs/call | 1 node postgres µs/call | 2 nodes calls/s (A + B) "
        "| 2 nodes p99 ms | node A µs/call | node B µs/call | 2 nodes postgres µs/call | 2/1 calls/s | failed (1 / 2) "
        "| projected 2 nodes, own cores (calls/s) |")
    say("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for label, a, b, ratio in side_by_side(labels, pg1, pg2):
        split = " + ".join(f"{part['rate']:,.0f}" for part in b["per_node"]) if b else "–"
        node_us = b["node_cpu_us"] if b else []
        projection = "–"
        if b:
            # Each node on a core of its own, PostgreSQL on cores of its own: each node's rate is
            # bounded by its CPU per call; PostgreSQL's CPU per call says how many cores it needs.
            node_bound = sum(1e6 / max(u, 1e-9) for u in node_us)
            pg_cores = node_bound * b["postgres_cpu_us"] / 1e6
            projection = f"≤ {node_bound:,.0f} (CPU only; postgres would need {pg_cores:.1f} cores)"
        say(f"| {label} | {fmt_rate(a)} | {us(a and a['groupd_cpu_us'])} | {us(a and a['postgres_cpu_us'])} "
            f"| {fmt_rate(b)} ({split}) | {b['p99_us'] / 1000 if b else 0:.1f} "
            f"| {us(node_us[0] if node_us else None)} | {us(node_us[1] if len(node_us) > 1 else None)} "
            f"| {us(b and b['postgres_cpu_us'])} | {ratio} | {a['failed'] if a else '–'} / {b['failed'] if b else '–'} "
            f"| {projection} |")
    say("\nThis machine has 2 cores: both nodes and PostgreSQL share core 0 and the load is on core 1, so two nodes "
        "cannot be faster than one here; the 2/1 column shows the cost of a second node, not scaling. The projection "
        "assumes each node on a core of its own and is an upper bound from CPU alone: batches of one group "
        "serialize on its lock across nodes, those of one app meet at their last statement (the app's ticket) "
        "and commit, and every commit waits for an fsync.")


def latency_table(results, args):
    lat = results.get("latency", {})
    rows = [(k, r) for part in ("postgres", "postgres_own_core", "sqlite")
            for k, r in lat.get(part, {}).get("runs", {}).items()]
    if rows:
        say(f"\n## 3. Event latency: SendGroupMessage into one group (paced, {args.latency_seconds} s) to "
            f"{args.subscribers} Subscribe streams, from just before the send to the bytes' arrival\n")
        say("| path | msg/s asked / achieved | sent ok / failed | ack p50 / p99 ms | p50 ms | p99 ms | p99.9 ms | max ms "
            "| last stream p50 / p99 ms | lost | dup | streams ended | store kept up |")
        say("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        for _, r in sorted(rows, key=lambda item: (-item[1]["rate"], item[1]["label"])):
            w = r["writer_result"]
            say(f"| {r['label']} | {r['rate']:,} / {w['achieved_rate']:,.0f} | {w['ok']:,} / {w['failed']} "
                f"| {w['ack_p50_ms']:.1f} / {w['ack_p99_ms']:.1f} | {r['p50_ms']:.2f} | {r['p99_ms']:.2f} "
                f"| {r['p999_ms']:.2f} | {r['max_ms']:.2f} | {r['last_stream_p50_ms']:.2f} / {r['last_stream_p99_ms']:.2f} "
                f"| {r['lost']} | {r['duplicates']} | {r['ended_streams']} | {'yes' if r['kept_up'] else 'NO (queueing)'} |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("binary", nargs="?")
    parser.add_argument("--seconds", type=int, default=8, help="each throughput load (after a 1 s warm-up)")
    parser.add_argument("--latency-seconds", type=float, default=10)
    parser.add_argument("--rate", type=int, default=1000, help="messages/s of the latency writer")
    parser.add_argument("--low-rate", type=int, default=200,
                        help="a second, lower writer rate that the store keeps up with (0: none)")
    parser.add_argument("--subscribers", type=int, default=10)
    parser.add_argument("--workloads", default=",".join(k for k, *_ in WORKLOADS),
                        help="comma-separated subset of " + ",".join(k for k, *_ in WORKLOADS))
    parser.add_argument("--skip", default="", help="comma-separated parts to skip: throughput,latency")
    parser.add_argument("--json", help="where to write every figure (default .build/bench/scaleout-<UTC time>.json)")
    parser.add_argument("--keep", action="store_true", help="keep the work directory (logs, data) after a successful run")
    parser.add_argument("--writer-process", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--target", help=argparse.SUPPRESS)
    parser.add_argument("--group", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.writer_process:
        asyncio.run(writer_process(args))
        return
    if not args.binary:
        parser.error("the groupd binary is required")
    args.workloads = set(args.workloads.split(","))
    args.rates = [args.rate] + ([args.low_rate] if args.low_rate else [])
    skip = set(filter(None, args.skip.split(",")))
    binary = Path(args.binary).resolve()
    from pg_cluster import PostgresCluster, find_bindir

    started = time.time()
    json_path = Path(args.json) if args.json else ROOT / ".build" / "bench" / f"scaleout-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}.json"
    workdir = Path(tempfile.mkdtemp(prefix="groupd-scaleout-"))
    build_tool("loadgen")
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < 2 or os.cpu_count() < 2:
        sys.exit("bench_scaleout needs 2 cores (server side on core 0, load on core 1)")
    version = subprocess.run([str(find_bindir() / "postgres"), "--version"], capture_output=True, text=True).stdout.strip()
    results = {"started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)), "binary": str(binary),
               "binary_mtime_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(binary.stat().st_mtime)),
               "machine": {"cores": os.cpu_count(), "loadavg_start": os.getloadavg()},
               "postgres_version": version, "seconds": args.seconds, "latency_seconds": args.latency_seconds,
               "rate": args.rate, "subscribers": args.subscribers, "throughput": {}, "latency": {}}
    cluster = PostgresCluster()
    try:
        # PostgreSQL inherits this process's affinity: start it from core 0, then move here to core 1
        # (the Python clients: seeding, the subscribers and the writer).
        os.sched_setaffinity(0, {int(SERVER_CORE)})
        try:
            cluster.start()
        finally:
            os.sched_setaffinity(0, {int(LOAD_CORE)})
        pg_affinity = sorted({c for pid in postgres_pids(cluster.pid) for c in affinity(pid)})
        results["pinning"] = {
            "groupd": f"core {SERVER_CORE} (taskset -c {SERVER_CORE}), every node",
            "postgres": f"core(s) {pg_affinity} (affinity inherited from the start, every process of the cluster)",
            "load": f"core {LOAD_CORE}: h2load, the C++ loadgen, the Python seeding, subscribers and writer",
        }
        results["postgres_settings"] = cluster.settings
        results["durability"] = "sqlite: durability full (synchronous=FULL); postgres: fsync=on, synchronous_commit=on"
        results["postgres_setup"] = "a fresh database per configuration, ANALYZE after seeding (throughput part)"
        say(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f}; {version}; binary {binary} "
            f"(built {results['binary_mtime_utc']})")
        say(f"pinning: groupd nodes on core {SERVER_CORE}; PostgreSQL (all processes) on core(s) {pg_affinity}; "
            f"load generators and Python clients on core {LOAD_CORE}")
        say(f"durability: SQLite full; PostgreSQL fsync=on, synchronous_commit=on; store pool_size 8; a fresh "
            f"database per configuration, ANALYZEd after seeding; {args.seconds} s per load after a 1 s warm-up; "
            f"workdir {workdir}")
        if "throughput" not in skip:
            say("\n# throughput (calls/s; CPU per call over the load, warm-up included)")
            throughput("sqlite_1", binary, workdir / "sqlite-1", args, cluster, None, 1, results["throughput"])
            throughput("postgres_1", binary, workdir / "postgres-1", args, cluster, cluster.create_database(), 1,
                       results["throughput"])
            throughput("postgres_2", binary, workdir / "postgres-2", args, cluster, cluster.create_database(), 2,
                       results["throughput"])
        if "latency" not in skip:
            say(f"\n# event latency ({args.subscribers} streams, {' and '.join(f'{r:,}' for r in args.rates)} messages/s, "
                f"{args.latency_seconds} s each)")
            latency("postgres", binary, workdir / "latency-pg", args, cluster.create_database(), results["latency"])
            # Again with PostgreSQL on the other core (with the light Python clients), as it would
            # run on a machine of its own: groupd alone on core 0.
            for pid in [cluster.pid] + postgres_pids(cluster.pid):
                try:
                    os.sched_setaffinity(pid, {int(LOAD_CORE)})
                except ProcessLookupError:
                    pass
            say(f"  (PostgreSQL moved to core {LOAD_CORE}: groupd alone on core {SERVER_CORE})")
            latency("postgres_own_core", binary, workdir / "latency-pg-own-core", args, cluster.create_database(),
                    results["latency"], where=f" on core {LOAD_CORE}")
            latency("sqlite", binary, workdir / "latency-sqlite", args, None, results["latency"])
    finally:
        cluster.stop()
        results["machine"]["loadavg_end"] = os.getloadavg()
        results["elapsed_s"] = round(time.time() - started, 1)
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps(results, indent=2) + "\n")
    report(results, args)
    if not args.keep:
        # Only after a run that went through: a failed one leaves its logs and data behind.
        shutil.rmtree(workdir, ignore_errors=True)
    say(f"\nelapsed {results['elapsed_s']:.0f} s; every figure in {json_path}"
        + (f"; logs and data in {workdir}" if args.keep else ""))


if __name__ == "__main__":
    main()
