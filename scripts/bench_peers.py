#!/usr/bin/env python3
"""The reference servers beside `make bench-rpc`: the same h2load load and pinning (server on core
0, h2load on core 1 with one thread) against

  - the C++ gRPC callback server of Benchmarks/LoadGen/peer.cc (its Health/Check), and
  - nghttpd (Debian's nghttp2-server), plaintext HTTP/2 serving a 10-byte file: the HTTP/2
    ceiling on this machine, with no gRPC at all.

    python3 scripts/bench_peers.py [--seconds 10] [--levels 1x1,8x32]

Needs `make bench-deps` (C++ gRPC, g++) and nghttpd (`apt-get install nghttp2-server`). Prints one
table row per server and level, in the columns of docs/PERFORMANCE.md.
"""
import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import Peer, free_port, h2load, wait_listening  # noqa: E402

EMPTY_MESSAGE = b"\x00\x00\x00\x00\x00"  # an empty protobuf message, gRPC-framed


def nghttpd(workdir: Path):
    """nghttpd on core 0, plaintext, serving `workdir/www/ten` (10 bytes)."""
    www = workdir / "www"
    www.mkdir()
    (www / "ten").write_bytes(b"0123456789")
    port = free_port()
    process = subprocess.Popen(["taskset", "-c", "0", "nghttpd", "--no-tls", "-d", str(www), str(port)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    wait_listening(port, process)
    return process, f"127.0.0.1:{port}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--levels", default="1x1,8x32")
    args = parser.parse_args()
    if shutil.which("nghttpd") is None:
        sys.exit("bench_peers: nghttpd is missing (apt-get install nghttp2-server)")
    levels = [tuple(int(n) for n in level.split("x")) for level in args.levels.split(",")]
    print("| server | method | c×m | req/s | p50 µs | p99 µs | failed |\n|---|---|---|---|---|---|---|")

    def row(server, method, level, result):
        print(f"| {server} | {method} | {level[0]}×{level[1]} | {result['rate']:,.0f} | "
              f"{result['p50_us']:,} | {result['p99_us']:,} | {result['failed']} |", flush=True)

    with tempfile.TemporaryDirectory(prefix="groupd-peers.") as work:
        workdir = Path(work)
        peer = Peer().start()
        try:
            for level in levels:
                result = h2load(peer.address, peer.process.pid, "/grpc.health.v1.Health/Check", EMPTY_MESSAGE, [],
                                level[0], level[1], args.seconds, workdir)
                row("C++ gRPC callback API", "Health/Check", level, result)
        finally:
            peer.stop()
        process, address = nghttpd(workdir)
        try:
            for level in levels:
                result = h2load(address, process.pid, "/ten", None, [], level[0], level[1], args.seconds, workdir)
                row("nghttpd (HTTP/2 ceiling)", "GET 10 B", level, result)
        finally:
            process.kill()
            process.wait()


if __name__ == "__main__":
    main()
