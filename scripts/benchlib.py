"""What the benchmark scripts share: their command line (`arguments`), a pinned groupd on a free
port with its own config (`server_config`) and data, bearer-token metadata (`auth_md`), its CPU
time and RSS from /proc, h2load runs with latency percentiles, the C++ load generator and peer
of Benchmarks/LoadGen (built on first use), gRPC framing, and many grpcio calls kept in flight
(`run_calls`).
"""
import argparse
import asyncio
import json
import os
import re
import socket
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

LOADGEN_DIR = ROOT / "Benchmarks" / "LoadGen"
TOOLS_DIR = ROOT / ".build" / "bench-tools"

# The `store:` block of a PostgreSQL store (`url` to fill in), for server_config's `store`.
POSTGRES_STORE = """\
store:
  backend: postgres
  url: {url}
  pool_size: 8
"""


def arguments(**options):
    """The command line of a benchmark: the groupd binary, then an option --NAME (NAME with `-`
    for `_`) for each keyword, of the type of its default."""
    parser = argparse.ArgumentParser()
    parser.add_argument("binary")
    for name, default in options.items():
        parser.add_argument("--" + name.replace("_", "-"), type=type(default), default=default)
    return parser.parse_args()


def server_config(port, data, durability="full", limits=None, extra="", store=""):
    """groupd's YAML for a benchmark: 127.0.0.1:`port`, `data_dir`, `durability`, the top-level
    lines `extra` (e.g. "max_connections: 1000\n") and `store` (e.g. POSTGRES_STORE filled in),
    and one app, the tests' APP_ID and its secret, with `limits` (a dict; a dict value, such as
    max_members, is written on one line)."""
    from support import APP_ID, APP_SECRET  # tests/support.py generates the stubs: only where needed

    text = (f"listen: {{ host: 127.0.0.1, port: {port} }}\ndata_dir: {data}\ndurability: {durability}\n{extra}{store}"
            f"apps:\n  - id: {APP_ID}\n    secrets: [{{ kid: k1, secret: {APP_SECRET} }}]\n")
    if limits:
        text += "    limits:\n"
        for name, value in limits.items():
            if isinstance(value, dict):
                value = "{ " + ", ".join(f"{key}: {number}" for key, number in value.items()) + " }"
            text += f"      {name}: {value}\n"
    return text


def auth_md(user=None, exp_in=24 * 3600):
    """Call metadata with a bearer token of the app's admin (`user` None) or of `user` (role user)."""
    from support import mint_token

    token = mint_token(exp_in=exp_in) if user is None else mint_token(sub=user, role="user", exp_in=exp_in)
    return [("authorization", f"Bearer {token}")]


def frame(message) -> bytes:
    """A message with its 5-byte gRPC prefix (what h2load sends as the body)."""
    payload = message.SerializeToString()
    return struct.pack(">BI", 0, len(payload)) + payload


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_listening(port, process, seconds=30):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"process exited with {process.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listening on {port} after {seconds} s")


def cpu_seconds(pid) -> float:
    """A process's user + system CPU time so far, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_kib(pid):
    """A process's resident set size in KiB (VmRSS), from /proc; 0 when it has none."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


class Server:
    """groupd pinned to core 0 (`taskset -c 0`), on a free port, with its config written into
    `workdir` at each start: server_config() with `settings` (limits, extra, store), or, given
    `config`, that template with `{port}`, `{data}` and `{durability}` filled in."""

    def __init__(self, binary, workdir, config=None, core="0", **settings):
        self.binary, self.workdir, self.config, self.core = Path(binary), Path(workdir), config, core
        self.settings = settings
        self.process = None
        self.port = None

    def start(self, durability="full"):
        self.port = free_port()
        path = self.workdir / f"groupd-{durability}.yaml"
        data = self.workdir / "data"
        if self.config is None:
            path.write_text(server_config(self.port, data, durability, **self.settings))
        else:
            path.write_text(self.config.format(port=self.port, data=data, durability=durability))
        self.process = subprocess.Popen(["taskset", "-c", self.core, str(self.binary), "serve", "--config", str(path)],
                                        stdout=open(self.workdir / "groupd.log", "ab"), stderr=subprocess.STDOUT)
        wait_listening(self.port, self.process)
        return self

    def stop(self):
        if self.process:
            self.process.terminate()
            self.process.wait(timeout=60)
            self.process = None

    def cpu_seconds(self):
        return cpu_seconds(self.process.pid)

    def rss_kib(self):
        return rss_kib(self.process.pid)

    @property
    def pid(self):
        return self.process.pid

    @property
    def address(self):
        return f"127.0.0.1:{self.port}"


def client_and_server(binary, name, **settings):
    """The start of a script whose client is this process: this process on core 1, a Server of
    `binary` (server_config with `settings`) in a new work directory groupd-NAME-*, not started,
    and the machine line printed."""
    os.sched_setaffinity(0, {1})
    workdir = Path(tempfile.mkdtemp(prefix=f"groupd-{name}-"))
    server = Server(Path(binary).resolve(), workdir, **settings)
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}; groupd on core 0, client on core 1; "
          f"workdir {workdir}")
    return server


def h2load(address, pid, path, body: bytes, headers, clients, streams, seconds, workdir, scheme="http", options=(),
           grpc=True):
    """h2load on core 1 against `address` (`body` None: a GET without gRPC headers; `scheme` https:
    TLS with ALPN h2; `options`: more h2load flags, e.g. --rps or --h1; `grpc` False: the body goes
    without the gRPC content type and `te`, which `headers` then give); returns req/s, p50/p99 µs,
    failures, 2xx responses and, when `pid` is given, that server's CPU µs per request over the run."""
    cpu_before = cpu_seconds(pid) if pid else 0
    workdir = Path(workdir)
    log = workdir / "h2.log"
    log.unlink(missing_ok=True)
    command = ["taskset", "-c", "1", "timeout", str(seconds + 30), "h2load", "-c", str(clients), "-m", str(streams),
               "-t", "1", "-D", str(seconds), "--warm-up-time", "1", f"--log-file={log}"]
    if body is not None:  # None: a plain GET (a reference HTTP/2 server), no gRPC headers
        body_file = workdir / "body.bin"
        body_file.write_bytes(body)
        command += ["-d", str(body_file)]
        if grpc:
            command += ["-H", "content-type: application/grpc", "-H", "te: trailers"]
    for header in headers:
        command += ["-H", header]
    command += list(options)
    out = subprocess.run(command + [f"{scheme}://{address}{path}"], capture_output=True, text=True).stdout
    rps = float(re.search(r"finished in [\d.]+s, ([\d.]+) req/s", out).group(1))
    failed = int(re.search(r"requests: .* (\d+) failed", out).group(1))
    done = int(re.search(r"requests: \d+ total, \d+ started, (\d+) done", out).group(1))
    lat = sorted(int(line.split()[2]) for line in open(log) if line.strip())
    pct = lambda p: lat[min(len(lat) - 1, int(len(lat) * p))] if lat else 0
    status_2xx = re.search(r"status codes: (\d+) 2xx", out)
    result = {"rate": rps, "p50_us": pct(.5), "p99_us": pct(.99), "failed": failed, "calls": done,
              "ok_2xx": int(status_2xx.group(1)) if status_2xx else 0}
    if pid:
        result["cpu_us"] = (cpu_seconds(pid) - cpu_before) / max(done, 1) * 1e6
    return result


def build_tool(name):
    """Builds Benchmarks/LoadGen/NAME.cc against C++ gRPC (libgrpc++-dev) once; returns the binary."""
    source = LOADGEN_DIR / f"{name}.cc"
    binary = TOOLS_DIR / name
    if not binary.exists() or binary.stat().st_mtime < source.stat().st_mtime:
        TOOLS_DIR.mkdir(parents=True, exist_ok=True)
        flags = subprocess.run(["pkg-config", "--cflags", "--libs", "grpc++"], capture_output=True, text=True, check=True).stdout.split()
        subprocess.run(["g++", "-O2", "-std=c++17", str(source), "-o", str(binary), *flags, "-lpthread"], check=True)
    return binary


def write_requests(path, records):
    """Writes a loadgen requests file: `records` is an iterable of (metadata pairs, message)."""
    with open(path, "wb") as out:
        for metadata, message in records:
            out.write(struct.pack("<H", len(metadata)))
            for name, value in metadata:
                name, value = name.encode(), value.encode()
                out.write(struct.pack("<H", len(name)) + name + struct.pack("<H", len(value)) + value)
            body = message.SerializeToString()
            out.write(struct.pack("<I", len(body)) + body)


def loadgen(address, pid, method, requests, connections=8, inflight=32, seconds=10, cycle=True, stream=None):
    """Runs the C++ load generator on core 1; returns its JSON result, with the server's CPU µs
    per call over the whole run (warm-up included) when `pid` is given."""
    command = ["taskset", "-c", "1", str(build_tool("loadgen")), "--target", address, "--method", method,
               "--requests", str(requests)]
    if stream:
        command += ["--stream", str(stream)]
    else:
        command += ["--connections", str(connections), "--inflight", str(inflight), "--duration", str(seconds)]
        if cycle:
            command.append("--cycle")
    cpu_before = cpu_seconds(pid) if pid else 0
    run = subprocess.run(command, capture_output=True, text=True, timeout=seconds + 120)
    if not run.stdout.strip():
        raise RuntimeError(f"loadgen failed ({run.returncode}): {run.stderr}")
    result = json.loads(run.stdout)
    if pid:
        calls = result.get("total_calls", result.get("items", 1))
        result["cpu_us"] = (cpu_seconds(pid) - cpu_before) / max(calls, 1) * 1e6
    if run.stderr.strip():
        result["stderr"] = run.stderr.strip().splitlines()[:3]
    return result


class Peer:
    """The C++ gRPC callback server of Benchmarks/LoadGen/peer.cc, pinned to core 0."""

    def __init__(self, core="0"):
        self.core = core
        self.process = None

    def start(self):
        self.port = free_port()
        self.process = subprocess.Popen(["taskset", "-c", self.core, str(build_tool("peer")), str(self.port)],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        wait_listening(self.port, self.process)
        return self

    def stop(self):
        if self.process:
            self.process.kill()
            self.process.wait()
            self.process = None

    @property
    def address(self):
        return f"127.0.0.1:{self.port}"


async def wait_all(streams, count, timeout, poll=0.002):
    """Whether every stream (anything with a list `arrivals`, such as bench_fanout's) has `count`
    arrivals within `timeout` s, looked at every `poll` s."""
    deadline = time.perf_counter() + timeout
    while time.perf_counter() < deadline:
        if all(len(stream.arrivals) >= count for stream in streams):
            return True
        await asyncio.sleep(poll)
    return False


async def run_calls(address, make_call, total, in_flight=256, seconds=None):
    """Runs `total` calls (or until `seconds` pass) with `in_flight` outstanding; returns (done, elapsed)."""
    import grpc  # only the scripts that make grpcio calls need it

    async with grpc.aio.insecure_channel(address) as channel:
        done = 0
        start = time.perf_counter()
        queue = iter(range(total))

        async def worker():
            nonlocal done
            for index in queue:
                if seconds and time.perf_counter() - start > seconds:
                    return
                await make_call(channel, index)
                done += 1

        await asyncio.gather(*(worker() for _ in range(in_flight)))
        return done, time.perf_counter() - start


def send_blocks(address, senders, order, seconds, warmup=20):
    """Blocks of sends of one line of chat from one grpcio client per sender (each in its own
    thread and channel, as one user), `warmup` sends a client into each group of `order` first,
    then one block of `seconds` per (kind, group) of `order`, printed as it ends:
    [(kind, messages/s)]."""
    from concurrent.futures import ThreadPoolExecutor

    import grpc
    import support
    from groupd.v1 import message_pb2, message_pb2_grpc

    channels = [grpc.insecure_channel(address) for _ in senders]
    try:
        stubs = [message_pb2_grpc.MessageServiceStub(channel) for channel in channels]
        mds = [support.user_md(user) for user in senders]

        def client(n, group, until, count):
            sent = 0
            while (count is None and time.perf_counter() < until) or (count is not None and sent < count):
                stubs[n].SendGroupMessage(message_pb2.SendGroupMessageRequest(group_id=group, text="a line of chat"),
                                          metadata=mds[n], timeout=30)
                sent += 1
            return sent

        def block(group, seconds=None, count=None):
            started = time.perf_counter()
            until = started + (seconds or 0)
            with ThreadPoolExecutor(len(senders)) as pool:
                sent = sum(pool.map(lambda n: client(n, group, until, count), range(len(senders))))
            return sent, sent / (time.perf_counter() - started)

        for group in dict.fromkeys(group for _, group in order):
            block(group, count=warmup)
        rates = []
        for kind, group in order:
            sent, rate = block(group, seconds=seconds)
            print(f"  {kind:8} {sent:6,} messages in {seconds} s: {rate:,.0f} messages/s", flush=True)
            rates.append((kind, rate))
        return rates
    finally:
        for channel in channels:
            channel.close()
