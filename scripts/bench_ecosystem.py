"""make bench-ecosystem: what TLS, gzip, the access log and Connect cost on the RPC benchmark, same run.

One release groupd at a time on core 0 (benchlib.Server), h2load on core 1; the same 1,000 groups
(scripts/bench_prepare.py) and the same bodies. Variants, each measured ROUNDS times in turn so that
drift on the noisy machine spreads over all of them:
  plain       h2c, no access log (the baseline)
  tls         TLS 1.3 with ALPN h2 (a P-256 certificate made here with openssl); h2load's TLS
  gzip        h2c; request bodies gzip-compressed (`grpc-encoding: gzip`) and responses accepted
              compressed (`grpc-accept-encoding: gzip`)
  access_log  h2c with `access_log: {enabled: true}`: one line per call to groupd's log file
  metrics     h2c with the Prometheus endpoint on (`metrics: {port}`): every call counted and timed
  connect_h2  the same calls as Connect unary calls in JSON (`application/json`, proto3 JSON bodies)
              over HTTP/2 (h2c): what the JSON transcoding and Connect's response shape cost
  connect_h1  the same JSON calls over HTTP/1.1 (h2load --h1: keep-alive, one request in flight per
              connection at a time, so -m streams mean nothing there; -c connections do)
  connect_h1_pool  the same over HTTP/1.1 with as many calls in flight as the HTTP/2 rows: clients x
              streams connections (256 at the default LEVEL), one call in flight on each, as an
              HTTP/1.1 client's connection pool keeps them
  trace_1     h2c with `tracing` at sample_ratio 1: every call's span (and each write's commit span)
              exported over OTLP/gRPC to scripts/otlp_sink.py, a collector on core 1 beside h2load
  trace_001   the same at sample_ratio 0.01
Methods: Health/Check, GetGroupsInfo (one of the 1,000 groups) and CreateGroup (a new PUBLIC group,
server-assigned id, every call a write).
Prints a Markdown table (req/s, p50/p99 µs, the server's CPU µs per call) and writes every figure
to .build/bench/ecosystem-<time>.json.

usage: bench_ecosystem.py BINARY [BINARY...]   (DUR=8 seconds per load, ROUNDS=3, LEVEL=8x32,
                                      VARIANTS=plain,connect_h2 to run some of the variants; plain
                                      always runs, the baseline)
Given several binaries (e.g. a build of main and one of a branch), each round runs every variant of
each binary in turn, and each binary's rows are compared with its own plain rows.
"""
import gzip
import json
import os
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import ROOT, Server, free_port, h2load  # noqa: E402
from support import CONFIG_TEMPLATE, APP_ID, APP_SECRET, OTHER_APP_ID, OTHER_APP_SECRET  # noqa: E402

DUR = int(os.environ.get("DUR", "8"))
ROUNDS = int(os.environ.get("ROUNDS", "3"))
CLIENTS, STREAMS = (int(x) for x in os.environ.get("LEVEL", "8x32").split("x"))


def config(extra=""):
    text = CONFIG_TEMPLATE.format(port="{port}", data_dir="{data}", max_message_bytes=4194304,
                                  app=APP_ID, secret=APP_SECRET, other_app=OTHER_APP_ID, other_secret=OTHER_APP_SECRET)
    text = text.replace("durability: full", "durability: {durability}")
    # CreateGroup's calls all name one owner: no limit on the groups a user may be in.
    text = text.replace("    secrets:\n", "    limits:\n      max_groups_per_user: 1000000000\n    secrets:\n", 1)
    return text.replace("apps:\n", extra + "apps:\n", 1)


def make_certificate(directory: Path):
    key, cert = directory / "server.key", directory / "server.crt"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                    "-keyout", str(key), "-out", str(cert), "-days", "2", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"], check=True, capture_output=True)
    return cert, key


def gzip_frame(framed: bytes) -> bytes:
    payload = gzip.compress(framed[5:])
    return struct.pack(">BI", 1, len(payload)) + payload


def main():
    binaries = [Path(arg).resolve() for arg in sys.argv[1:]] or [(ROOT / ".build" / "release" / "groupd").resolve()]
    labels = [binary.name if len(binaries) == 1 or len({b.name for b in binaries}) == len(binaries) else str(binary)
              for binary in binaries]
    work = Path(tempfile.mkdtemp(prefix="groupd-bench-eco-"))
    cert, key = make_certificate(work)
    variants = {
        "plain": ("", "http", []),
        "tls": (f"tls:\n  cert_file: {cert}\n  key_file: {key}\n", "https", []),
        "gzip": ("", "http", ["grpc-encoding: gzip", "grpc-accept-encoding: gzip"]),
        "access_log": ("access_log:\n  enabled: true\n", "http", []),
        "metrics": (f"metrics:\n  port: {free_port()}\n", "http", []),
        # h2load asks for gzip by default: identity, as the gRPC variants get (compression has its own row).
        "connect_h2": ("", "http", ["content-type: application/json", "accept-encoding: identity"]),
        "connect_h1": ("", "http", ["content-type: application/json", "accept-encoding: identity"]),
        "connect_h1_pool": ("", "http", ["content-type: application/json", "accept-encoding: identity"]),
        "trace_1": ("{tracing_1}", "http", []),
        "trace_001": ("{tracing_001}", "http", []),
    }
    if os.environ.get("VARIANTS"):
        chosen = {"plain", *os.environ["VARIANTS"].split(",")}
        variants = {name: value for name, value in variants.items() if name in chosen}
    # The trace collector of the tracing variants, on core 1 with h2load. The queue holds a second
    # of spans at the plain rate, so that a slow export drops none (the drop counter is printed).
    sink = None
    if any(name.startswith("trace_") for name in variants):
        sink = subprocess.Popen(["taskset", "-c", "1", sys.executable, str(ROOT / "scripts" / "otlp_sink.py")],
                                stdout=subprocess.PIPE, text=True)
        sink_port = int(sink.stdout.readline().split()[1])
        for name, ratio in (("trace_1", 1), ("trace_001", 0.01)):
            if name in variants:
                tracing = (f"tracing:\n  otlp_endpoint: http://127.0.0.1:{sink_port}\n  sample_ratio: {ratio}\n"
                           "  max_queue_size: 200000\n  max_batch_size: 8192\n")
                variants[name] = (tracing, *variants[name][1:])
    # The groups, once, on a plain server over the data directory every variant then opens.
    seed = Server(binaries[0], work, config()).start()
    subprocess.run([sys.executable, str(ROOT / "scripts" / "bench_prepare.py"), str(seed.port), str(work), "1000"], check=True)
    seed.stop()
    token = (work / "token").read_text().strip()
    bodies = {"Health/Check": ("/grpc.health.v1.Health/Check", (work / "health.bin").read_bytes()),
              "GetGroupsInfo": ("/groupd.v1.GroupService/GetGroupsInfo", (work / "getgroupsinfo.bin").read_bytes()),
              "CreateGroup": ("/groupd.v1.GroupService/CreateGroup", (work / "creategroup.bin").read_bytes())}
    # The same requests as proto3 JSON, for the Connect variants.
    json_bodies = {"Health/Check": b"{}", "GetGroupsInfo": b'{"groupIds":["bench-7"]}',
                   "CreateGroup": b'{"type":"GROUP_TYPE_PUBLIC","ownerUserId":"owner-1","profile":{"name":"bench group"}}'}
    results = {(label, name): {method: [] for method in bodies} for label in labels for name in variants}
    for round_ in range(ROUNDS):
        for (label, binary), (name, (extra, scheme, headers)) in (
                ((lb, v) for lb in zip(labels, binaries) for v in variants.items())):
            server = Server(binary, work, config(extra)).start()
            try:
                for method, (path, body) in bodies.items():
                    if name == "gzip":
                        body = gzip_frame(body) if len(body) > 5 else body
                    connect = name.startswith("connect_")
                    clients, streams = (CLIENTS * STREAMS, 1) if name == "connect_h1_pool" else (CLIENTS, STREAMS)
                    result = h2load(server.address, server.pid, path, json_bodies[method] if connect else body,
                                    [f"authorization: Bearer {token}", *headers], clients, streams, DUR, work, scheme=scheme,
                                    options=["--h1"] if name.startswith("connect_h1") else (), grpc=not connect)
                    if connect:  # a Connect call that failed answers a non-2xx status
                        result["failed"] += result["calls"] - result["ok_2xx"]
                    results[(label, name)][method].append(result)
                    print(f"round {round_ + 1} {label} {name:10} {method:14} {result['rate']:9.0f}/s p50 {result['p50_us']} µs "
                          f"p99 {result['p99_us']} µs cpu {result['cpu_us']:.1f} µs failed {result['failed']}", flush=True)
            finally:
                server.stop()
    print(f"\nmedian of {ROUNDS} rounds, h2load -c {CLIENTS} -m {STREAMS} -t 1 -D {DUR}, server on core 0\n")
    several = len(binaries) > 1
    print(("| method | binary " if several else "| method ") + "| variant | req/s | vs plain | p50 µs | p99 µs | server CPU µs/call | failed |")
    print("|---|---|---|---|---|---|---|---|" + ("---|" if several else ""))
    for method in bodies:
        for label in labels:
            base = statistics.median(r["rate"] for r in results[(label, "plain")][method])
            for name in variants:
                runs = results[(label, name)][method]
                med = lambda key: statistics.median(r[key] for r in runs)
                print(f"| {method} | " + (f"{label} | " if several else "") + f"{name} | {med('rate'):.0f} | "
                      f"{med('rate') / base:.2f}× | {med('p50_us'):.0f} | {med('p99_us'):.0f} | {med('cpu_us'):.1f} | "
                      f"{sum(r['failed'] for r in runs)} |")
    if sink:
        sink.terminate()
        print(f"\ntrace collector: {sink.communicate(timeout=30)[0].strip()}")
    out = ROOT / ".build" / "bench"
    out.mkdir(parents=True, exist_ok=True)
    keyed = {f"{label} {name}" if several else name: value for (label, name), value in results.items()}
    (out / f"ecosystem-{time.strftime('%Y%m%d-%H%M%S')}.json").write_text(json.dumps(keyed, indent=1))
    shutil.rmtree(work, ignore_errors=True)  # the access-log variant leaves a log of a few hundred MB


if __name__ == "__main__":
    main()
